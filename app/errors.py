"""One error hierarchy, mapped to HTTP in one place: `{"error": "<Kind>", "detail": "..."}`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class QuiverError(Exception):
    status_code = 400

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code

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


def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(QuiverError)
    async def _quiver(_: Request, exc: QuiverError) -> JSONResponse:
        return JSONResponse(
            error_body(exc.kind, exc.message), exc.status_code, headers=exc.headers()
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body("Invalid", _format_validation(list(exc.errors()))), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # the framework could not parse the body (e.g. nesting depth)
            return JSONResponse(error_body("Invalid", f"body: {exc.detail}"), 422)
        kinds = {404: "NotFound", 405: "MethodNotAllowed", 401: "Unauthorized", 403: "Forbidden"}
        kind = kinds.get(exc.status_code, "HTTPError")
        # A 405 keeps the framework's `Allow` header (RFC 9110 §15.5.6).
        return JSONResponse(error_body(kind, str(exc.detail)), exc.status_code, exc.headers)
