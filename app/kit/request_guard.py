"""Pure ASGI guard in front of every route: body size limit (413) and NUL characters (422).

Runs before any parsing, so an oversized body is refused without being read to its end (chunked
bodies without `Content-Length` are counted as they arrive), and no text containing U+0000 reaches
storage: PostgreSQL cannot store it in text or JSON columns while SQLite would, so it is refused
the same way on both stores — in JSON, URL-encoded forms and multipart uploads alike. (What a
run meets — model output, fetched pages, tool results — is stored with NUL replaced instead:
`app/db/storable.py`.)
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import Invalid, PayloadTooLarge, QuiverError, quiver_error_response

_ESCAPED_NUL = b"\\u0000"
_PERCENT_NUL = re.compile(rb"%00")
NUL_MESSAGE = "NUL characters (U+0000) are not accepted"


def _nul_path(value: Any, path: tuple[str, ...] = ()) -> tuple[str, ...] | None:
    """Where the first NUL character sits in a parsed JSON value (a key counts too)."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return where
        elif isinstance(item, dict):
            for key, sub in item.items():
                if "\x00" in key:
                    return where
                stack.append((sub, (*where, key)))
        elif isinstance(item, list):
            stack.extend((sub, (*where, str(i))) for i, sub in enumerate(item))
    return None


def body_nul_error(body: bytes, content_type: bytes = b"") -> str | None:
    """The 422 detail for a body that carries a NUL character, else None.

    A raw NUL byte in UTF-8 text (every route takes text: JSON, forms, multipart uploads of
    text files; a body that is not UTF-8 is left to the route, which says so), `%00` in a
    URL-encoded form, or the escape `\\u0000` in a JSON value (only bodies containing it are
    parsed here; a body that does not parse is left to the route).
    """
    if b"\x00" in body and _utf8(body):
        return f"body: {NUL_MESSAGE}"
    media = content_type.split(b";", 1)[0].strip().lower()
    if media == b"application/x-www-form-urlencoded" and _PERCENT_NUL.search(body):
        return f"body: {NUL_MESSAGE}"
    if _ESCAPED_NUL not in body:
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None
    where = _nul_path(parsed)
    if where is None:
        return None
    return f"{'.'.join(where) or 'body'}: {NUL_MESSAGE}"


def _utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _url_nul_error(scope: Scope) -> str | None:
    raw_path = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogateescape")
    if b"\x00" in raw_path or _PERCENT_NUL.search(raw_path) or "\x00" in scope.get("path", ""):
        return f"path: {NUL_MESSAGE}"
    query: bytes = scope.get("query_string", b"")
    if b"\x00" in query or _PERCENT_NUL.search(query):
        return f"query: {NUL_MESSAGE}"
    return None


class RequestGuard:
    """Refuses, before routing: bodies above `max_body_bytes` (413) and NUL characters in the
    path, the query string or the body (422). The body is read once and replayed to the app;
    later `receive` calls (client disconnects) go to the server as before."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, max_import_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_import_bytes = max_import_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        detail = _url_nul_error(scope)
        if detail is not None:
            await self._refuse(Invalid(detail), scope, receive, send)
            return
        headers = dict(scope["headers"])
        limit, variable = self._limit(scope)
        declared = headers.get(b"content-length")
        if declared is None and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)
            return
        if declared is not None and declared.strip().isdigit() and (int(declared) > limit):
            await self._refuse(_too_large(limit, variable), scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(_too_large(limit, variable), scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        detail = body_nul_error(body, headers.get(b"content-type", b""))
        if detail is not None:
            await self._refuse(Invalid(detail), scope, receive, send)
            return
        await self.app(scope, replay_body(body, receive), send)

    def _limit(self, scope: Scope) -> tuple[int, str]:
        """Document imports (`…/import`, knowledge `…/documents`) have their own, larger
        limit."""
        if str(scope.get("path", "")).endswith(("/import", "/documents")):
            return self.max_import_bytes, "QUIVER_MAX_IMPORT_BYTES"
        return self.max_body_bytes, "QUIVER_MAX_BODY_BYTES"

    @staticmethod
    async def _refuse(error: QuiverError, scope: Scope, receive: Receive, send: Send) -> None:
        await quiver_error_response(str(scope.get("path", "")), error)(scope, receive, send)


def _too_large(limit: int, variable: str) -> PayloadTooLarge:
    return PayloadTooLarge(f"request body is larger than {limit} bytes ({variable})")


def replay_body(body: bytes, receive: Receive, *, more_body: bool = False) -> Receive:
    """A `receive` that hands out `body` (already read by a middleware) first, then defers to
    `receive` (the rest of the body when `more_body`, or the disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more_body}
        return await receive()

    return replay
