"""One error hierarchy, mapped to HTTP in one place: `{"error": "<Kind>", "detail": "..."}`.

Under `OPENAI_PREFIX` (the OpenAI-compatible routes, docs/openai-api.md) the same errors take
OpenAI's shape instead: `{"error": {"message", "type", "param", "code"}}`, 400 for bad input.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException


class QuiverError(Exception):
    status_code = 400

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        self.param = param
        """The request field at fault (OpenAI's `param`), when one is."""
        self.code = code
        """A machine-readable code for OpenAI's `code` (e.g. `model_not_found`)."""

    @property
    def kind(self) -> str:
        return type(self).__name__

    def headers(self) -> dict[str, str] | None:
        return {"WWW-Authenticate": "Bearer"} if self.status_code == 401 else None


class NotFound(QuiverError):
    status_code = 404


class Conflict(QuiverError):
    status_code = 409


class Invalid(QuiverError):
    status_code = 422


class Unauthorized(QuiverError):
    status_code = 401


class Forbidden(QuiverError):
    status_code = 403


class RateLimited(QuiverError):
    status_code = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": str(self.retry_after)}


class PayloadTooLarge(QuiverError):
    status_code = 413


class Upstream(QuiverError):
    status_code = 502


class Unavailable(QuiverError):
    status_code = 503


def error_body(kind: str, detail: str) -> dict[str, str]:
    return {"error": kind, "detail": detail}


OPENAI_PREFIX = "/v1/"
"""Routes that answer errors in OpenAI's shape (`app/openai_api/`)."""
_OPENAI_TYPES = {
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def openai_error(
    status: int, detail: str, *, param: str | None = None, code: str | None = None
) -> tuple[int, dict[str, Any]]:
    """(status, body) in OpenAI's error shape; a 422 becomes OpenAI's 400 for bad input."""
    if status == 422:
        status = 400
    kind, default_code = _OPENAI_TYPES.get(status, ("invalid_request_error", "invalid_request"))
    if status >= 500:
        kind, default_code = "server_error", "service_unavailable" if status == 503 else "error"
    body = {"message": detail, "type": kind, "param": param, "code": code or default_code}
    return status, {"error": body}


def error_response(
    path: str,
    status: int,
    kind: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    """The error response for a request to `path`: OpenAI's shape under `OPENAI_PREFIX`."""
    if path.startswith(OPENAI_PREFIX):
        status, body = openai_error(status, detail, param=param, code=code)
        return JSONResponse(body, status, headers=headers)
    return JSONResponse(error_body(kind, detail), status, headers=headers)


def quiver_error_response(path: str, exc: QuiverError) -> JSONResponse:
    return error_response(
        path,
        exc.status_code,
        exc.kind,
        exc.message,
        headers=exc.headers(),
        param=exc.param,
        code=exc.code,
    )


_LOCATIONS = frozenset({"body", "query", "path", "header", "cookie"})


def _format_validation(errors: list[Any]) -> str:
    parts = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in _LOCATIONS:  # only the leading request part, not a field "path"
            loc = loc[1:]
        if err.get("type") == "json_invalid":  # loc holds a character offset, not a field
            loc = []
        where = ".".join(loc) or "body"
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "json_invalid" and err.get("ctx", {}).get("error"):
            message = f"{message}: {err['ctx']['error']}"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


_STORAGE_MESSAGES = ("database or disk is full", "disk i/o error", "no space left on device")
_STORAGE_STATES = ("53100", "58030")
"""Postgres: disk_full, io_error."""


def storage_failure(exc: BaseException) -> str | None:
    """Why storage could not take a write (a full disk, a failing one), else None: the
    answer is a 503, not a 500 — the request was fine and nothing of it was kept (its
    transaction rolled back)."""
    orig = getattr(exc, "orig", None) or exc
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    text = str(orig).lower()
    if state in _STORAGE_STATES or any(m in text for m in _STORAGE_MESSAGES):
        return str(orig).splitlines()[0][:200] if str(orig) else type(orig).__name__
    return None


STORAGE_ERRORS = (DBAPIError, asyncpg.PostgresError)
"""What a storage failure is raised as (through SQLAlchemy, or raw asyncpg on the run path)."""


def storage_unavailable(exc: BaseException) -> Unavailable | None:
    """The 503 for a storage failure (`storage_failure`), else None (a bug: a 500)."""
    reason = storage_failure(exc)
    if reason is None:
        return None
    return Unavailable(f"storage is full or failing ({reason}); nothing was saved, retry later")


def _first_field(errors: list[Any]) -> str | None:
    """The first field a validation error names (OpenAI's `param`)."""
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in _LOCATIONS:
            loc = loc[1:]
        if loc and err.get("type") != "json_invalid":
            return ".".join(loc)
    return None


def add_error_handlers(app: FastAPI) -> None:
    async def _storage(request: Request, exc: Exception) -> JSONResponse:
        error = storage_unavailable(exc)
        if error is None:
            raise exc  # anything else is a bug: the server's 500
        return quiver_error_response(request.url.path, error)

    for kind in STORAGE_ERRORS:
        app.add_exception_handler(kind, _storage)

    @app.exception_handler(QuiverError)
    async def _quiver(request: Request, exc: QuiverError) -> JSONResponse:
        return quiver_error_response(request.url.path, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        detail = _format_validation(errors)
        return error_response(request.url.path, 422, "Invalid", detail, param=_first_field(errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        path = request.url.path
        if exc.status_code == 400:  # the framework could not parse the body (e.g. nesting depth)
            return error_response(path, 422, "Invalid", f"body: {exc.detail}")
        kinds = {404: "NotFound", 405: "MethodNotAllowed", 401: "Unauthorized", 403: "Forbidden"}
        kind = kinds.get(exc.status_code, "HTTPError")
        # A 405 keeps the framework's `Allow` header (RFC 9110 §15.5.6).
        headers = dict(exc.headers) if exc.headers else None
        return error_response(path, exc.status_code, kind, str(exc.detail), headers=headers)
