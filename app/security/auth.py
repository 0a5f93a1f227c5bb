"""The bearer pre-check: a request to the API without any key gets its 401 before parsing.

The keys themselves are verified by the route dependencies in `app/apikeys/auth.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import error_response

HeaderCheck = Callable[[dict[bytes, bytes]], bool]


class BearerPrecheck:
    """Pure ASGI: a request to the API without any bearer key gets its 401 before the body is
    parsed (otherwise malformed JSON would answer 422 first). Keys are verified by the route
    dependencies as before. `also_allow` lets other credentials through to those dependencies
    (the console passes its session cookie check)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        prefixes: tuple[str, ...] = ("/api/",),
        also_allow: HeaderCheck | None = None,
    ) -> None:
        self.app = app
        self.prefixes = prefixes
        self.also_allow = also_allow

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.prefixes):
            headers = dict(scope["headers"])
            header = headers.get(b"authorization", b"")
            scheme, _, token = header.decode("latin-1").partition(" ")
            other = self.also_allow is not None and self.also_allow(headers)
            if (scheme.lower() != "bearer" or not token.strip()) and not other:
                response = error_response(
                    scope["path"],
                    401,
                    "Unauthorized",
                    "missing API key: send 'Authorization: Bearer <key>'",
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
