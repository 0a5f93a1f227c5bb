"""The CRUD contract every admin resource shares, run once per resource.

What differs per resource (bodies, nested routes, links) stays in that resource's router tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.agents import test_router as agents
from tests.connectors import test_router as connectors
from tests.databases import test_router as databases
from tests.fixtures.crud import check_duplicates, check_slugs, check_unknown_ids
from tests.knowledge import test_router as knowledge
from tests.mcp import test_router as mcp
from tests.skills import test_router as skills

Factory = Callable[..., dict[str, Any]]

NAMED: dict[str, tuple[str, Factory]] = {
    "agents": (agents.PATH, agents.agent),
    "connectors": (connectors.PATH, connectors.connector),
    "databases": (databases.PATH, databases.database),
    "mcp-servers": (mcp.PATH, mcp.remote),
    "skills": (skills.PATH, skills.skill),
    "knowledge-bases": (knowledge.PATH, knowledge.knowledge_base),
}
"""Resources with a unique slug `name`: path and a factory of valid bodies."""

PATCHES: dict[str, tuple[str, dict[str, Any]]] = {
    **{resource: (path, {"description": "x"}) for resource, (path, _) in NAMED.items()},
    "conventions": ("/api/v1/conventions", {"content": "x"}),
    "api-keys": ("/api/v1/api-keys", {"name": "x"}),
}
"""Every admin resource: path and a valid patch."""


@pytest.mark.parametrize("resource", list(PATCHES))
async def test_unknown_ids_are_404(client: httpx.AsyncClient, resource: str) -> None:
    path, patch = PATCHES[resource]
    await check_unknown_ids(client, path, patch)


@pytest.mark.parametrize("resource", list(NAMED))
async def test_names_are_slugs(client: httpx.AsyncClient, resource: str) -> None:
    path, factory = NAMED[resource]
    await check_slugs(client, path, factory)


@pytest.mark.parametrize("resource", list(NAMED))
async def test_duplicate_names_are_409(client: httpx.AsyncClient, resource: str) -> None:
    path, factory = NAMED[resource]
    await check_duplicates(client, path, factory)
