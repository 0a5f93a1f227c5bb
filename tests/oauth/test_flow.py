"""The whole MCP authorization flow with the `mcp` SDK's own OAuth client provider, against a
live Quiver over HTTP: `quiver serve` on its embedded SQLite, and an app on Postgres.

The 401 names the protected-resource metadata; the SDK registers (RFC 7591), sends the person
to the consent page (signed in to the console with their own chat key; the approval is the
form post a browser sends), exchanges the code with its PKCE verifier, calls a tool; the run
belongs to the person's key; a refresh rotates both tokens; revocation ends the grant (401).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientMetadata

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN as PG_ADMIN_TOKEN
from tests.fixtures.live import serve_app
from tests.fixtures.served import ADMIN_TOKEN as SERVED_ADMIN_TOKEN
from tests.fixtures.served import INITIALIZE, clean_env, quiver_serve
from tests.oauth.helpers import CALLBACK, MemoryStorage, Person, sign_in, unique

ROOT = Path(__file__).resolve().parents[2]
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module", params=["sqlite-quiver-serve", "postgres"])
async def live(
    request: pytest.FixtureRequest,
    committing_settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[str, str]]:
    """(base URL, admin token) of a live Quiver."""
    if request.param == "postgres":
        async with serve_app(create_app(committing_settings)) as base_url:
            yield base_url, PG_ADMIN_TOKEN
        return
    home = tmp_path_factory.mktemp("oauth-serve")
    env = clean_env(QUIVER_DATA_DIR=str(home), PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "app.cli", "serve"]
    with quiver_serve(command, env=env, cwd=home, timeout_s=120) as served:
        yield served.base_url, SERVED_ADMIN_TOKEN


async def created(admin: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await admin.post(f"/api/v1/{path}", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def initialize(url: str, token: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        headers = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
        return await http.post(url, json=INITIALIZE, headers=headers)


async def test_the_mcp_sdk_connects_with_oauth(live: tuple[str, str]) -> None:
    base, admin_token = live
    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {admin_token}"}, timeout=30
    ) as admin:
        skill = await created(
            admin,
            "skills",
            {"name": unique("brew"), "description": "How to brew tea", "content": "Steep 3 min."},
        )
        agent = await created(
            admin,
            "agents",
            {"name": unique("tea"), "instructions": "Tea help.", "skill_ids": [skill["id"]]},
        )
        person_key = (await created(admin, "api-keys", {"name": unique("alice")}))["key"]
    url = f"{base}/mcp/agents/{agent['name']}"
    metadata_url = f"{base}/.well-known/oauth-protected-resource/mcp/agents/{agent['name']}"

    async with httpx.AsyncClient(timeout=30) as anon:
        refused = await anon.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
        resource = (await anon.get(metadata_url)).json()
        assert resource["resource"] == url
        assert resource["authorization_servers"] == [base]
        server = (await anon.get(f"{base}/.well-known/oauth-authorization-server")).json()
        assert server["code_challenge_methods_supported"] == ["S256"]

    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        await sign_in(browser, person_key)
        person = Person(browser)
        storage = MemoryStorage()
        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(
                client_name="flow test",
                redirect_uris=[CALLBACK],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
            ),
            storage=storage,
            redirect_handler=person.redirect_handler,
            callback_handler=person.callback_handler,
        )

        async def read_skill() -> str:
            async with (
                create_mcp_http_client(auth=provider) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                names = [tool.name for tool in (await client.list_tools()).tools]
                assert "read_skill" in names
                return text(await client.call_tool("read_skill", {"name": skill["name"]}))

        assert "Steep 3 min." in await read_skill()
        assert len(person.seen) == 1
        assert agent["name"] in person.seen[0]
        assert skill["name"] in person.seen[0]  # what the agent can reach
        assert storage.client is not None
        first = storage.tokens
        assert first is not None
        assert first.access_token.startswith("qvo_")
        assert first.refresh_token is not None

        listed = await browser.get("/ui/keys")
        assert listed.text.count('data-testid="oauth-token-row"') == 1
        assert "flow test" in listed.text
        assert first.access_token not in listed.text

        # The session's run is the person's, as with their own chat key.
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {person_key}"}, timeout=30
        ) as own:
            runs = (await own.get("/api/v1/runs", params={"limit": 50})).json()["items"]
        assert [r["kind"] for r in runs if r["agent_id"] == agent["id"]] == ["mcp_session"]

        # Refresh (the access token expired): both tokens rotate, no new consent.
        provider.context.token_expiry_time = time.time() - 1
        assert "Steep 3 min." in await read_skill()
        second = storage.tokens
        assert second is not None
        assert second.access_token != first.access_token
        assert second.refresh_token not in (None, first.refresh_token)
        assert len(person.seen) == 1
        stale = await initialize(url, first.access_token)
        assert stale.status_code == 401
        assert 'error="invalid_token"' in stale.headers["www-authenticate"]

        # Revocation (RFC 7009) ends the grant: the live access token answers 401.
        client = storage.client
        form = {"token": str(second.refresh_token), "token_type_hint": "refresh_token"}
        auth: tuple[str, str] | None = None
        if client.token_endpoint_auth_method == "client_secret_basic":
            assert client.client_secret is not None
            auth = (client.client_id, client.client_secret)
        else:
            form["client_id"] = client.client_id
        async with httpx.AsyncClient(timeout=30) as anon:
            revoked = await anon.post(f"{base}/oauth/revoke", data=form, auth=auth)  # type: ignore[arg-type]
        assert revoked.status_code == 200, revoked.text
        after = await initialize(url, second.access_token)
        assert after.status_code == 401
        assert 'resource_metadata="' in after.headers["www-authenticate"]
        assert 'data-testid="oauth-token-row"' not in (await browser.get("/ui/keys")).text
