"""`POST /api/v1/chat` is answered by `ChatFastPath` (app/chat/fast_route.py) when the key cache
answers its key, by the route otherwise: which requests it takes (that both answer alike:
test_fast_route_alike.py)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.apikeys.schemas import ApiKeyCreate
from app.apikeys.service import api_key_service
from app.chat.fast_route import ChatFastPath
from tests.chat.conftest import unique


def scope(token: str | None, *, content_type: bytes = b"application/json") -> dict[str, Any]:
    headers = [(b"content-type", content_type)]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return {"type": "http", "method": "POST", "path": "/api/v1/chat", "headers": headers}


async def test_only_a_key_the_cache_answers_and_a_valid_json_body_take_the_fast_path(
    app: FastAPI, session: AsyncSession
) -> None:
    runtime = app.state.runtime
    _, token = await api_key_service.create(session, ApiKeyCreate(name=unique("k")))
    body = json.dumps({"agent_id": str(uuid.uuid4()), "message": "hi"}).encode()
    assert ChatFastPath._request(scope(token), body, runtime) is None  # not cached yet
    assert await runtime.keys.authenticate(session, token) is not None  # the route's lookup
    taken = ChatFastPath._request(scope(token), body, runtime)
    assert taken is not None
    req, principal, runs = taken
    assert (req.message, principal.user, runs) == ("hi", None, runtime.runs)
    for other in (
        ChatFastPath._request(scope(None), body, runtime),  # no key: the pre-check's 401
        ChatFastPath._request(scope(token + "x"), body, runtime),  # unknown key
        ChatFastPath._request(scope(token, content_type=b"text/plain"), body, runtime),
        ChatFastPath._request(scope(token), b'{"message": "hi"}', runtime),  # no agent_id
        ChatFastPath._request(scope(token), b"{", runtime),  # not JSON
    ):
        assert other is None
    runtime.keys.clear()
    assert ChatFastPath._request(scope(token), body, runtime) is None
