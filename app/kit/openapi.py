"""The OpenAPI document and `/docs`: every error status declared with the one error shape,
the bearer scheme declared (Swagger UI's Authorize button), a 405 that names the allowed
methods; `/docs` itself is `docs_page.py`."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.errors import OPENAI_PREFIX, error_body
from app.kit.docs_page import install_swagger_ui

BEARER_SCHEME = "bearerAuth"
ERROR_SCHEMA_NAME = "Error"

ERROR_SCHEMA: dict[str, Any] = {
    "title": ERROR_SCHEMA_NAME,
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "The kind of error, e.g. `NotFound`"},
        "detail": {"type": "string", "description": "A human message naming the cause"},
    },
    "required": ["error", "detail"],
    "additionalProperties": False,
}

OPENAI_ERROR_SCHEMA_NAME = "OpenAIError"
OPENAI_ERROR_SCHEMA: dict[str, Any] = {
    "title": OPENAI_ERROR_SCHEMA_NAME,
    "type": "object",
    "description": "OpenAI's error shape, on the OpenAI-compatible routes (`/v1/...`)",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string", "description": "e.g. `invalid_request_error`"},
                "param": {"type": ["string", "null"], "description": "The field at fault"},
                "code": {"type": ["string", "null"], "description": "e.g. `model_not_found`"},
            },
            "required": ["message", "type", "param", "code"],
        }
    },
    "required": ["error"],
}

DESCRIPTIONS: dict[str, str] = {
    "400": "Bad request",
    "401": "Missing, invalid or revoked API key",
    "403": "The API key lacks the scope this route needs",
    "404": "Unknown id",
    "409": "Conflict (e.g. duplicate name)",
    "413": "Request body larger than QUIVER_MAX_BODY_BYTES",
    "422": "Invalid input (the detail names the field), malformed JSON or a NUL character",
    "429": "Too many requests: the key's rate limit, or too many failed key attempts from "
    "this address (see Retry-After)",
    "502": "The upstream server failed",
    "503": "A required back-end is not available",
}
_FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


def _error_response(status: str, existing: dict[str, Any] | None, name: str) -> dict[str, Any]:
    description = (existing or {}).get("description")
    if not description or description in {"Validation Error", "Successful Response"}:
        description = DESCRIPTIONS.get(status, "Error")
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
    }


def _statuses(path: str, operation: dict[str, Any]) -> set[str]:
    """The error statuses the guards around every route can answer for this operation."""
    statuses = {"422"}  # query/path validation, NUL characters anywhere in the request
    if path.startswith(("/api/", OPENAI_PREFIX)):
        statuses |= {"401", "403", "429"}
    if "requestBody" in operation:
        statuses.add("413")
    if any(p.get("in") == "path" for p in operation.get("parameters", [])):
        statuses.add("404")
    return statuses


def declare_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Rewrite a generated document: every 4xx/5xx uses the `{error, detail}` schema (OpenAI's
    error shape under `/v1/`), the guards' statuses are declared on every operation, `/api/`
    and `/v1/` operations need the bearer key."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in _FASTAPI_VALIDATION_SCHEMAS:
        schemas.pop(name, None)
    schemas[ERROR_SCHEMA_NAME] = ERROR_SCHEMA
    schemas[OPENAI_ERROR_SCHEMA_NAME] = OPENAI_ERROR_SCHEMA
    components.setdefault("securitySchemes", {})[BEARER_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `Authorization: Bearer <key>` (scope admin or chat)",
    }
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses: dict[str, Any] = operation["responses"]
            wanted = {s for s in responses if s[:1] in {"4", "5"}} | _statuses(path, operation)
            name = ERROR_SCHEMA_NAME
            if path.startswith(OPENAI_PREFIX):  # OpenAI's shape; bad input is its 400
                name = OPENAI_ERROR_SCHEMA_NAME
                if "422" in wanted:
                    wanted = (wanted - {"422"}) | {"400"}
                    responses.pop("422", None)
            for status in sorted(wanted):
                responses[status] = _error_response(status, responses.get(status), name)
            if path.startswith(("/api/", OPENAI_PREFIX)):
                operation["security"] = [{BEARER_SCHEME: []}]
    return schema


_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class AllowedMethods:
    """The methods `/openapi.json` declares for a request path, for a 405's `Allow` header.

    The framework names only the first route whose path matched (one route per method); a
    path matching a literal route (`/connectors/import`) is that route's, not an item's."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._index: list[tuple[int, re.Pattern[str], set[str]]] | None = None

    def _built(self) -> list[tuple[int, re.Pattern[str], set[str]]]:
        if self._index is None:
            index = []
            for path, operations in self.app.openapi().get("paths", {}).items():
                methods = {m.upper() for m in operations if m in _METHODS}
                if "GET" in methods:
                    methods.add("HEAD")
                pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path))
                index.append((path.count("{"), re.compile(f"^{pattern}/?$"), methods))
            self._index = sorted(index, key=lambda entry: entry[0])
        return self._index

    def __call__(self, path: str) -> str | None:
        found: set[str] = set()
        fewest: int | None = None
        for params, pattern, methods in self._built():
            if fewest is not None and params > fewest:
                break
            if pattern.match(path):
                fewest = params
                found |= methods
        return ", ".join(sorted(found)) if found else None


def install_docs(app: FastAPI) -> None:
    """`/openapi.json` with declared errors, and `/docs` from local assets.

    Build the app with `docs_url=None, redoc_url=None` (the defaults load from a CDN).
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = declare_errors(
                get_openapi(
                    title=app.title,
                    version=app.version,
                    description=app.description,
                    routes=app.routes,
                )
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    allowed = AllowedMethods(app)

    @app.exception_handler(405)
    async def _method_not_allowed(request: Request, exc: Exception) -> JSONResponse:
        headers = dict(getattr(exc, "headers", None) or {})
        allow = allowed(request.url.path)
        if allow is not None:
            headers["Allow"] = allow
        detail = exc.detail if isinstance(exc, StarletteHTTPException) else "Method Not Allowed"
        return JSONResponse(error_body("MethodNotAllowed", str(detail)), 405, headers)

    install_swagger_ui(app)
