"""The bearer pre-check: a request to the API without any key gets its 401 before parsing.

The keys themselves are verified by the route dependencies in `app/apikeys/auth.py`.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import error_body


class BearerPrecheck:
    """Pure ASGI: a request to the API without any bearer key gets its 401 before the body is
    parsed (otherwise malformed JSON would answer 422 first). Keys are verified by the route
    dependencies as before."""

    def __init__(self, app: ASGIApp, *, prefix: str = "/api/") -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.prefix):
            header = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, token = header.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                response = JSONResponse(
                    error_body(
                        "Unauthorized", "missing API key: send 'Authorization: Bearer <key>'"
                    ),
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
