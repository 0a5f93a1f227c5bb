"""`POST /api/v1/chat` without the framework's routing and dependency resolution, when it can.

In a burst of chat starts every request's routing, dependency resolution and body validation
queue on one event loop before its run starts: ~1.3 ms of CPU per request through FastAPI,
most of it the machinery (docs/benchmarks.md, "Side by side"). `ChatFastPath` answers the
common request itself, with the route's own parts and outcome (`app/chat/router.py`): a JSON
body that validates as `ChatRequest`, a bearer key the key cache answers without a query or a write
(`ApiKeyCache.cached`) with scope `chat` or `admin`, a valid `X-Quiver-User`. Everything else
(no key, a key not cached or due for its use record, another content type, a body or header
that does not validate, the console's session) goes on to the route unchanged, which answers it
as before (401, 403, 422, ...). Errors of the run start are rendered by the app's handlers'
function (`quiver_error_response`). tests/chat/test_fast_route_alike.py sends each kind of
request through both and compares the answers.

Pure ASGI, inside the bearer pre-check and the request guard (body size, NUL characters), so
those still run first; `scope["route"]` is the chat route, for the metrics' route label.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.apikeys.cache import ApiKeyCache
from app.chat.router import run_stream
from app.chat.runner import RunManager
from app.chat.schemas import ChatRequest
from app.config import Settings
from app.errors import STORAGE_ERRORS, QuiverError, quiver_error_response, storage_unavailable
from app.kit.request_guard import replay_body
from app.tenancy.principal import Principal, user_header

_CHAT_SCOPES = frozenset({"admin", "chat"})


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers, the first value of each (as `Request.headers.get` reads them)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        found.setdefault(name, value)
    return found


def _json_body(headers: dict[bytes, bytes]) -> bool:
    media = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
    return media == b"application/json"


def _bearer(headers: dict[bytes, bytes]) -> str | None:
    scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class ChatFastPath:
    def __init__(self, app: ASGIApp, *, path: str, route: Any) -> None:
        self.app = app
        self.path = path
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        state = scope["app"].state
        started = self._request(scope, body, getattr(state, "runtime", None))
        if started is None:
            await self.app(scope, replay_body(body, receive), send)
            return
        req, principal, runs = started
        scope["route"] = self.route
        try:
            active, queue = await runs.start(req, principal)
        except (QuiverError, *STORAGE_ERRORS) as exc:
            known = exc if isinstance(exc, QuiverError) else storage_unavailable(exc)
            if known is None:
                raise
            await quiver_error_response(self.path, known)(scope, receive, send)
            return
        settings: Settings = state.settings
        await run_stream(active, queue, settings)(scope, receive, send)

    @staticmethod
    def _request(
        scope: Scope, body: bytes, runtime: Any
    ) -> tuple[ChatRequest, Principal, RunManager] | None:
        """The request, its principal and the run manager; None: the route answers it."""
        if runtime is None:
            return None
        headers = _headers(scope)
        token = _bearer(headers)
        if token is None or not _json_body(headers):
            return None
        cache: ApiKeyCache = runtime.keys
        key = cache.cached(token)
        if key is None or not _CHAT_SCOPES & set(key.scopes):
            return None
        try:
            req = ChatRequest.model_validate(json.loads(body))
            user = headers.get(b"x-quiver-user")
            principal = Principal.of(
                key, user_header(None if user is None else user.decode("latin-1"))
            )
            principal = principal.with_user(req.user)
        except (ValueError, RecursionError, QuiverError):  # ValidationError is a ValueError
            return None
        runs: RunManager = runtime.runs
        return req, principal, runs
