"""Tenancy on the embedded SQLite store: ownership, the run rate limit, and cascading deletes."""

from __future__ import annotations

import pytest

from app.config import Settings
from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.storage.test_sqlite_app import _query, embedded, keyring, printed_keys, running

__all__ = ["embedded", "keyring"]  # fixtures used by this module


def _count(settings: Settings, table: str) -> int:
    return int(_query(settings, f"SELECT count(*) FROM {table}")[0][0])


async def test_owners_rate_limit_and_delete_on_sqlite(
    embedded: Settings, scripted_llm: ScriptedLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = embedded.model_copy(update={"llm_base_url": scripted_llm.base_url})
    async with running(settings):
        pass
    [admin_key] = printed_keys(capsys.readouterr().out)
    async with running(settings, admin_key) as admin:
        agent = (await admin.post("/api/v1/agents", json={"name": "helper"})).json()
        keys = [
            (await admin.post("/api/v1/api-keys", json=body)).json()["key"]
            for body in (
                {"name": "fe", "rate_limit_per_minute": 1},
                {"name": "other"},
            )
        ]
        mine = {"Authorization": f"Bearer {keys[0]}"}
        other = {"Authorization": f"Bearer {keys[1]}"}
        scripted_llm.script(Turn(text="hello"))
        body = {"agent_id": agent["id"], "message": "hi", "user": "alice"}
        async with admin.stream("POST", "/api/v1/chat", json=body, headers=mine) as resp:
            assert resp.status_code == 200
            events = await read_sse(resp)
        conv = events[0].data["conversation_id"]
        limited = await admin.post("/api/v1/chat", json=body, headers=mine)
        assert limited.status_code == 429, limited.text
        assert int(limited.headers["retry-after"]) >= 1
        path = f"/api/v1/conversations/{conv}"
        assert (await admin.get(path, headers=other)).status_code == 404
        assert (await admin.get(path, headers=mine)).status_code == 404  # no user
        alice = {**mine, "X-Quiver-User": "alice"}
        assert (await admin.get(path, headers=alice)).status_code == 200
        assert _count(settings, "run_events") > 0
        assert (await admin.delete(path, headers=alice)).status_code == 204
        for table in ("conversations", "runs", "run_events", "messages"):
            assert _count(settings, table) == 0, table
        assert _count(settings, "run_starts") == 1
