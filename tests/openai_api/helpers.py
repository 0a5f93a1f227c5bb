"""Shared helpers: keys, agents and raw SSE for the OpenAI-compatible API tests."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.chat.conftest import unique


async def chat_key(live: httpx.AsyncClient, **fields: Any) -> str:
    """A new chat-scope key (its secret)."""
    body = {"name": unique("oai"), "scopes": ["chat"], **fields}
    created = await live.post("/api/v1/api-keys", json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["key"])


def data_lines(text: str) -> list[str]:
    """The `data:` payloads of an SSE body, in order."""
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def chunks_of(text: str) -> list[dict[str, Any]]:
    return [json.loads(d) for d in data_lines(text) if d != "[DONE]"]
