"""Prompts and resources of the agent endpoint, with the official `mcp` client against a live
Quiver: the agent's skills as prompts, its skills' files and knowledge documents as resources,
and resource links from an upstream server (`@modelcontextprotocol/server-everything` from npm)
read through the endpoint; `list_changed` for both."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from app.config import Settings
from app.main import create_app
from tests.fixtures.live import serve_app
from tests.mcp.servers import TIME_SERVER
from tests.mcp.test_import import everything_command
from tests.mcpserver.test_endpoint import connect, post, text, unique
from tests.skills.test_folders import zip_folder

DATA = Path(__file__).resolve().parents[1] / "data"
FOLDER = DATA / "skills" / "mcp-builder"
DOCUMENT = DATA / "knowledge" / "python-reference" / "try.txt"


@pytest.fixture(scope="module")
async def live_url(committing_settings: Settings) -> AsyncIterator[str]:
    settings = committing_settings.model_copy(
        update={"mcp_stdio_commands": [TIME_SERVER, everything_command()], "tool_timeout_s": 30.0}
    )
    async with serve_app(create_app(settings)) as base_url:
        yield base_url


@pytest.fixture
async def admin(live_url: str) -> AsyncIterator[httpx.AsyncClient]:
    from tests.conftest import ADMIN_TOKEN

    async with httpx.AsyncClient(
        base_url=live_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60
    ) as client:
        yield client


async def make_agent(admin: httpx.AsyncClient, **config: Any) -> dict[str, Any]:
    skill_name = unique("mcp-builder").replace("_", "-")
    imported = await admin.post(
        "/api/v1/skills/import",
        files={"file": ("mcp-builder.zip", zip_folder(FOLDER), "application/zip")},
        data={"name": skill_name},
    )
    assert imported.status_code == 201, imported.text
    kb = await post(admin, "knowledge-bases", {"name": unique("pydocs")})
    added = await admin.post(
        f"/api/v1/knowledge-bases/{kb['id']}/documents",
        files={"file": (DOCUMENT.name, DOCUMENT.read_bytes(), "text/plain")},
    )
    assert added.status_code == 201, added.text
    # created from a Claude Desktop document; its tools are listed without a refresh
    server_name = unique("everything")
    document = {"mcpServers": {server_name: {"command": everything_command(), "args": ["stdio"]}}}
    result = await admin.post("/api/v1/mcp-servers/import", json=document)
    assert result.status_code == 200, result.text
    (server,) = result.json()["servers"]
    assert server["status"] == "created", server
    assert server["server"]["tools"], server
    agent = await post(
        admin,
        "agents",
        {
            "name": unique("agent"),
            "skill_ids": [imported.json()["id"]],
            "knowledge_base_ids": [kb["id"]],
            "mcp_server_ids": [server["server"]["id"]],
            "model_config_json": config,
        },
    )
    return agent | {
        "skill": imported.json(),
        "kb": kb,
        "document": added.json(),
        "server": server["server"],
    }


async def test_skills_are_prompts(admin: httpx.AsyncClient, live_url: str) -> None:
    agent = await make_agent(admin)
    skill = agent["skill"]
    async with connect(live_url, agent["name"]) as client:
        capabilities = client.server_capabilities
        assert capabilities.prompts is not None
        assert capabilities.prompts.list_changed
        assert capabilities.resources is not None
        assert capabilities.resources.list_changed
        listed = await client.list_prompts()
        assert [(p.name, p.description) for p in listed.prompts] == [
            (skill["name"], skill["description"])
        ]
        got = await client.get_prompt(skill["name"])
        (message,) = got.messages
        assert message.role == "user"
        assert isinstance(message.content, types.TextContent)
        body = message.content.text
        assert body.startswith(f"# Skill: {skill['name']}\n\n# MCP Server Development Guide")
        assert "- reference/mcp_best_practices.md (7.2 KB)" in body
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("nope")
        assert f"Unknown prompt 'nope'. Valid: {skill['name']}" in unknown.value.error.message


async def test_skill_files_and_documents_are_resources(
    admin: httpx.AsyncClient, live_url: str
) -> None:
    agent = await make_agent(admin)
    skill, kb = agent["skill"]["name"], agent["kb"]["name"]
    async with connect(live_url, agent["name"]) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        skill_uris = {u for u in listed if u.startswith(f"quiver://skills/{skill}/")}
        assert len(skill_uris) == 10  # SKILL.md and the nine other files
        best = f"quiver://skills/{skill}/reference/mcp_best_practices.md"
        assert listed[best].mime_type == "text/markdown"
        doc_uri = f"quiver://knowledge/{kb}/try.txt"
        assert doc_uri in listed
        read = await client.read_resource(best)
        (content,) = read.contents
        assert isinstance(content, types.TextResourceContents)
        assert content.text == (FOLDER / "reference" / "mcp_best_practices.md").read_text()
        script = await client.read_resource(f"quiver://skills/{skill}/scripts/connections.py")
        assert script.contents[0].text == (FOLDER / "scripts" / "connections.py").read_text()  # type: ignore[union-attr]
        doc = await client.read_resource(doc_uri)
        assert "finally" in doc.contents[0].text  # type: ignore[union-attr]
        for uri in (
            f"quiver://skills/{skill}/../../etc/passwd",
            f"quiver://skills/{skill}/reference/nope.md",
            "quiver://skills/someone-elses/SKILL.md",
            f"quiver://knowledge/{kb}/missing.txt",
        ):
            with pytest.raises(MCPError) as missing:
                await client.read_resource(uri)
            assert "not found" in missing.value.error.message, uri


async def test_resource_links_from_upstream_are_listed_and_read_through(
    admin: httpx.AsyncClient, live_url: str
) -> None:
    agent = await make_agent(admin)
    server = agent["server"]["name"]
    changed: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(
            message, types.ResourceListChangedNotification | types.PromptListChangedNotification
        ):
            changed.append(message.method)

    async with connect(live_url, agent["name"], message_handler=on_message) as client:
        before = {str(r.uri) for r in (await client.list_resources()).resources}
        await client.list_prompts()
        assert not any(u.startswith("demo://") for u in before)
        result = await client.call_tool(
            "mcp",
            {
                "subcommand": "call",
                "server": server,
                "tool": "get-resource-links",
                "parameters": {"count": 2},
            },
        )
        assert not result.is_error, text(result)
        links = [c for c in result.content if isinstance(c, types.ResourceLink)]
        assert [str(link.uri) for link in links] == [
            "demo://resource/dynamic/blob/1",
            "demo://resource/dynamic/text/2",
        ]
        await wait_for(changed, ["notifications/resources/list_changed"])
        after = {str(r.uri) for r in (await client.list_resources()).resources}
        assert after - before == {str(link.uri) for link in links}
        read = await client.read_resource("demo://resource/dynamic/text/2")
        (content,) = read.contents
        assert isinstance(content, types.TextResourceContents)
        assert "Resource 2" in content.text
        blob = await client.read_resource("demo://resource/dynamic/blob/1")
        assert isinstance(blob.contents[0], types.BlobResourceContents)
        assert base64.b64decode(blob.contents[0].blob)
        with pytest.raises(MCPError):
            await client.read_resource("demo://resource/nothing/here")

        # the agent's skills change: the next call's answer says the prompts changed
        patched = await admin.patch(
            f"/api/v1/skills/{agent['skill']['id']}", json={"description": "Build MCP servers"}
        )
        assert patched.status_code == 200
        changed.clear()
        await client.call_tool("mcp", {"subcommand": "discover", "server": server})
        await wait_for(
            changed,
            ["notifications/prompts/list_changed", "notifications/resources/list_changed"],
        )
        prompts = (await client.list_prompts()).prompts
        assert prompts[0].description == "Build MCP servers"


async def wait_for(seen: list[str], expected: list[str]) -> None:
    for _ in range(200):
        if len(seen) >= len(expected):
            break
        await asyncio.sleep(0.02)
    assert seen == expected
