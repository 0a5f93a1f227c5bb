"""The warm cache of texts and definitions derived from rows (keyed by id + updated_at)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from app.pipeline.sources import legacy
from app.pipeline.sources.stubs import connector_stub, mcp_stub
from app.tools.cache import DERIVED, DerivedCache, row_key
from app.tools.names import NameAllocator
from tests.fixtures.pipeline import (
    RecordingConnectors,
    RecordingMcp,
    make_action,
    make_connector,
    make_server,
    mcp_tool,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_unkeyed_values_are_built_every_time() -> None:
    cache = DerivedCache()
    calls: list[int] = []
    assert cache.get(None, lambda: calls.append(1) or "x") == "x"
    assert cache.get(None, lambda: calls.append(1) or "x") == "x"
    assert len(calls) == 2


def test_keyed_values_are_built_once_and_evicted_lru() -> None:
    cache = DerivedCache(max_entries=2)
    assert cache.get("a", lambda: 1) == 1
    assert cache.get("a", lambda: 2) == 1
    cache.get("b", lambda: 3)
    cache.get("a", lambda: 4)  # refresh "a": "b" is now the oldest
    cache.get("c", lambda: 5)
    assert cache.get("b", lambda: 6) == 6
    assert cache.get("a", lambda: 7) == 7  # "a" was pushed out by "b"
    assert (cache.hits, cache.misses) == (2, 5)


def test_row_key_needs_a_persisted_row() -> None:
    connector = make_connector("c", [])
    assert row_key(connector) is None
    connector.id, connector.updated_at = uuid.uuid4(), T0
    assert row_key(connector, "stub") == ("Connector", connector.id, T0, "stub")


def _persist(row: object, stamp: datetime = T0) -> None:
    row.id = uuid.uuid4()  # type: ignore[attr-defined]
    row.updated_at = stamp  # type: ignore[attr-defined]


def test_connector_stub_is_rebuilt_when_the_row_or_an_action_changes() -> None:
    action = make_action("get")
    connector = make_connector("crm", [action], description="Old.")
    _persist(connector)
    _persist(action)
    assert connector_stub(connector) == "- crm: Old. Actions (1): get"
    connector.description = "New."
    assert connector_stub(connector) == "- crm: Old. Actions (1): get"  # same version: cached
    connector.updated_at = T0 + timedelta(seconds=1)
    assert connector_stub(connector) == "- crm: New. Actions (1): get"
    added = make_action("put")
    _persist(added)
    connector.actions.append(added)
    assert connector_stub(connector) == "- crm: New. Actions (2): get, put"


def test_mcp_stub_follows_the_tools_cache_refresh() -> None:
    server = make_server("gh", [mcp_tool("a")])
    _persist(server)
    assert mcp_stub(server) == "- gh: Tools (1): a"
    server.tools_cache = [mcp_tool("a"), mcp_tool("b")]
    server.updated_at = T0 + timedelta(minutes=5)
    assert mcp_stub(server) == "- gh: Tools (2): a, b"


def test_cached_legacy_definitions_are_renamed_per_assembly() -> None:
    server = make_server("ops", [mcp_tool("deploy")])
    connector = make_connector("ops", [make_action("deploy")])
    for row in (server, connector, *connector.actions):
        _persist(row)
    first = legacy.mcp_tools_legacy([server], RecordingMcp(), NameAllocator())
    hits = DERIVED.hits
    names = NameAllocator()
    legacy.connector_tools([connector], RecordingConnectors(), names)
    again = legacy.mcp_tools_legacy([server], RecordingMcp(), names)
    assert DERIVED.hits == hits + 1
    assert list(first.list_tools()) == ["ops__deploy"]
    assert list(again.list_tools()) == ["ops__deploy_2"]
    assert again.list_tools()["ops__deploy_2"].target == "mcp:ops/deploy"
