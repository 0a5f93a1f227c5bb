"""What the disk-full tests check on either store: a refused write is a 503 `{error, detail}`,
and every write is stored whole or not at all."""

from __future__ import annotations

from typing import Any

import httpx


def answered(resp: httpx.Response) -> int:
    """The status; a 5xx must be the storage 503 with the usual JSON body."""
    if resp.status_code >= 500:
        assert resp.status_code == 503, resp.text
        assert resp.headers["content-type"].startswith("application/json"), resp.text
        body: dict[str, Any] = resp.json()
        assert body["error"] == "Unavailable"
        assert "storage" in body["detail"]
    return resp.status_code


async def stored_documents(client: httpx.AsyncClient, documents: str) -> int:
    """How many documents `documents` holds, each checked whole: ready, with its text and all
    its chunks (a document never stands without them)."""
    listed = (await client.get(documents, params={"limit": 200})).json()
    for item in listed["items"]:
        stored = (await client.get(f"{documents}/{item['id']}")).json()
        assert stored["status"] == "ready", stored
        assert stored["chunk_count"] > 0, stored
        assert stored["text"], "a stored document has its text"
        assert len(stored["chunks"]) == stored["chunk_count"], (
            f"{stored['name']} stored with {len(stored['chunks'])} of its "
            f"{stored['chunk_count']} chunks"
        )
    total: int = listed["total"]
    return total


async def stored_conversations(client: httpx.AsyncClient) -> int:
    """How many conversations there are, each with its run and the user's message."""
    conversations = (await client.get("/api/v1/conversations")).json()
    for item in conversations["items"]:
        stored = (await client.get(f"/api/v1/conversations/{item['id']}")).json()
        assert len(stored["runs"]) == 1, stored["runs"]
        assert stored["messages"][0]["role"] == "user", stored["messages"][0]
    total: int = conversations["total"]
    return total
