"""The endpoint against both protocol eras the installed `mcp` SDK speaks, with the SDK's own
client over HTTP against a live `quiver serve`:

- the `initialize` handshake (2024-11-05 … 2025-11-25): served, a session is one run;
- the stateless revision (2026-07-28): refused with -32022 naming the handshake versions, so
  the SDK's default `auto` client falls back to the handshake and a client pinned to the new
  revision gets a typed error (see docs/mcp-endpoint.md).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from tests.fixtures.served import ADMIN_TOKEN, INITIALIZE, Served, clean_env, quiver_serve
from tests.mcpserver.test_endpoint import MCP_HEADERS, text, unique

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "app.cli", "serve"]
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("eras")
    env = clean_env(QUIVER_DATA_DIR=str(data), PYTHONPATH=str(ROOT))
    with quiver_serve(SERVE, env=env, cwd=data, timeout_s=120) as live:
        yield live


@pytest.fixture(scope="module")
async def agent(served: Served) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=served.base_url, headers=AUTH, timeout=30) as admin:
        skill = await admin.post(
            "/api/v1/skills",
            json={"name": unique("tea"), "description": "Tea", "content": "Steep 3 min."},
        )
        assert skill.status_code == 201, skill.text
        created = await admin.post(
            "/api/v1/agents",
            json={"name": unique("eras"), "skill_ids": [skill.json()["id"]]},
        )
        assert created.status_code == 201, created.text
        return created.json() | {"skill": skill.json()["name"]}


@contextlib.asynccontextmanager
async def client(served: Served, agent: dict[str, Any], mode: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers=AUTH) as http:
        url = f"{served.base_url}/mcp/agents/{agent['name']}"
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as opened:  # type: ignore[arg-type]
            yield opened


async def _runs(served: Served, agent: dict[str, Any]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=served.base_url, headers=AUTH, timeout=30) as admin:
        listed = await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})
        items: list[dict[str, Any]] = listed.json()["items"]
        return items


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_handshake_era_is_served_and_auto_falls_back_to_it(
    served: Served, agent: dict[str, Any], mode: str
) -> None:
    before = len(await _runs(served, agent))
    async with client(served, agent, mode) as opened:
        assert opened.protocol_version == LATEST_HANDSHAKE_VERSION
        names = {t.name for t in (await opened.list_tools()).tools}
        assert "read_skill" in names
        result = await opened.call_tool("read_skill", {"name": agent["skill"]})
        assert not result.is_error, text(result)
        assert "Steep 3 min." in text(result)
    runs = await _runs(served, agent)
    assert len(runs) == before + 1  # one session, one run, ended by the client
    assert (runs[0]["kind"], runs[0]["status"], runs[0]["iterations"]) == (
        "mcp_session",
        "completed",
        1,
    )


async def test_a_client_pinned_to_the_stateless_revision_gets_a_typed_refusal(
    served: Served, agent: dict[str, Any]
) -> None:
    (modern,) = MODERN_PROTOCOL_VERSIONS
    before = len(await _runs(served, agent))
    with pytest.raises((MCPError, BaseExceptionGroup)) as caught:
        async with client(served, agent, modern) as opened:
            await opened.list_tools()
    errors = [caught.value]
    while isinstance(errors[-1], BaseExceptionGroup):
        errors.append(errors[-1].exceptions[0])
    error = errors[-1]
    assert isinstance(error, MCPError), repr(error)
    assert error.code == UNSUPPORTED_PROTOCOL_VERSION
    assert "initialize" in error.message
    assert len(await _runs(served, agent)) == before  # no run came of it


async def test_the_raw_refusal_names_the_versions_served(
    served: Served, agent: dict[str, Any]
) -> None:
    (modern,) = MODERN_PROTOCOL_VERSIONS
    url = f"{served.base_url}/mcp/agents/{agent['name']}"
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
    async with httpx.AsyncClient(timeout=30) as raw:
        refused = await raw.post(
            url, json=discover, headers=MCP_HEADERS | AUTH | {"Mcp-Protocol-Version": modern}
        )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert error["data"] == {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": modern}


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
async def test_every_handshake_version_opens_a_session(
    served: Served, agent: dict[str, Any], version: str
) -> None:
    url = f"{served.base_url}/mcp/agents/{agent['name']}"
    body = INITIALIZE | {"params": INITIALIZE["params"] | {"protocolVersion": version}}
    async with httpx.AsyncClient(timeout=30) as raw:
        opened = await raw.post(url, json=body, headers=MCP_HEADERS | AUTH)
        assert opened.status_code == 200, opened.text
        assert f'"protocolVersion":"{version}"' in opened.text.replace(" ", "")
        session = (
            MCP_HEADERS
            | AUTH
            | {
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "Mcp-Protocol-Version": version,
            }
        )
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        listed = await raw.post(url, json=listing, headers=session)
        assert listed.status_code == 200, listed.text
        assert "read_skill" in listed.text
        assert (await raw.delete(url, headers=session)).status_code == 200
