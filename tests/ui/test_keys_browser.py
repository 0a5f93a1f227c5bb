"""The keys page and the OAuth consent page in Chromium against a live Quiver.

An admin creates a key (scopes, an agent, a rate limit; the secret shown once) and it works;
the admin approves an MCP client on the consent page (the answer redirects to the client's
callback, which Chromium checks against the page's CSP); the OAuth token is listed beside the
keys and revoked from there (its next MCP request answers 401); the created key is revoked.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from playwright.async_api import Browser, Request, Route, expect

from tests.conftest import ADMIN_TOKEN
from tests.fixtures.served import INITIALIZE
from tests.ui.test_console_browser import shot, sign_in

CALLBACK = "http://127.0.0.1:9/callback"


async def test_keys_page_and_oauth_consent(
    chromium: Browser, console_url: str, screenshots: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    agent_name, key_name = f"desk_{suffix}", f"ops_{suffix}"
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as admin:
        made = await admin.post("/api/v1/agents", json={"name": agent_name})
        assert made.status_code == 201, made.text
        await admin.post("/api/v1/agents", json={"name": f"other_{suffix}"})  # not found below
        client = (
            await admin.post(
                "/oauth/register",
                json={
                    "client_name": f"Inspector {suffix}",
                    "redirect_uris": [CALLBACK],
                    "token_endpoint_auth_method": "none",
                    "grant_types": ["authorization_code", "refresh_token"],
                },
            )
        ).json()

    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await sign_in(page, console_url, ADMIN_TOKEN)
    await page.get_by_role("link", name="Keys").click()
    await expect(page).to_have_url(f"{console_url}/ui/keys")

    # Create: scopes, one agent, a rate limit; the secret is on this page only.
    await page.get_by_test_id("key-name").fill(key_name)
    await page.get_by_test_id("key-agents-find").fill(agent_name)  # htmx swaps the options
    options = page.get_by_test_id("key-agents").locator("option:not([disabled])")
    await expect(options).to_have_text([agent_name])
    await page.get_by_test_id("key-agents").select_option(label=agent_name)
    await page.get_by_test_id("key-rate").fill("5")
    await page.get_by_test_id("key-create").click()
    secret = (await page.get_by_test_id("key-secret").inner_text()).strip()
    assert secret.startswith("qv_")
    row = page.get_by_test_id("key-row").filter(has_text=key_name)
    await expect(row).to_contain_text(agent_name)
    await expect(row).to_contain_text("5")
    await page.goto(f"{console_url}/ui/keys")
    assert secret not in await page.content()  # shown once
    await expect(page.get_by_test_id("key-row").filter(has_text=key_name)).to_have_count(1)
    async with httpx.AsyncClient(base_url=console_url, timeout=30) as http:
        own = await http.get("/api/v1/runs", headers={"Authorization": f"Bearer {secret}"})
        assert own.status_code == 200

    # Consent: the client's authorization request, approved in the browser.
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    resource = f"{console_url}/mcp/agents/{agent_name}"
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": CALLBACK,
            "state": "xyz",
            "code_challenge": challenge.decode().rstrip("="),
            "code_challenge_method": "S256",
            "resource": resource,
        }
    )
    landed: list[str] = []

    async def callback(route: Route, request: Request) -> None:
        landed.append(request.url)
        await route.fulfill(status=200, body="signed in", content_type="text/plain")

    await page.route(f"{CALLBACK}*", callback)
    await page.goto(f"{console_url}/oauth/authorize?{query}")
    await expect(page.get_by_test_id("consent-agent")).to_have_text(agent_name)
    await expect(page.get_by_test_id("consent-client")).to_have_text(f"Inspector {suffix}")
    await shot(page, screenshots, "consent")
    await page.get_by_test_id("consent-approve").click()
    await expect(page.locator("body")).to_have_text("signed in")
    answer = parse_qs(urlsplit(landed[-1]).query)
    assert answer["state"] == ["xyz"]
    async with httpx.AsyncClient(base_url=console_url, timeout=30) as http:
        issued = await http.post(
            "/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": answer["code"][0],
                "redirect_uri": CALLBACK,
                "client_id": client["client_id"],
                "code_verifier": verifier,
                "resource": resource,
            },
        )
        assert issued.status_code == 200, issued.text
        access = issued.json()["access_token"]
        mcp_headers = {
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {access}",
        }
        opened = await http.post(f"/mcp/agents/{agent_name}", json=INITIALIZE, headers=mcp_headers)
        assert opened.status_code == 200, opened.text

        # Listed beside the keys, and revoked from there.
        await page.goto(f"{console_url}/ui/keys")
        token_row = page.get_by_test_id("oauth-token-row").filter(has_text=f"Inspector {suffix}")
        await expect(token_row.get_by_test_id("oauth-token-agent")).to_have_text(agent_name)
        await shot(page, screenshots, "keys")  # both tables, no secret on the page
        await token_row.get_by_test_id("oauth-token-revoke").click()
        await expect(page.get_by_test_id("notice")).to_contain_text("revoked")
        await expect(token_row).to_have_count(0)
        closed = await http.post(f"/mcp/agents/{agent_name}", json=INITIALIZE, headers=mcp_headers)
        assert closed.status_code == 401

        # The created key, revoked.
        row = page.get_by_test_id("key-row").filter(has_text=key_name)
        await row.get_by_test_id("key-revoke").click()
        await expect(row.get_by_test_id("key-revoked")).to_be_visible()
        gone = await http.get("/api/v1/runs", headers={"Authorization": f"Bearer {secret}"})
        assert gone.status_code == 401
    await context.close()


async def test_consent_reached_from_another_site_keeps_the_session(
    chromium: Browser, console_url: str
) -> None:
    """A client's link (another site) carries no SameSite=Strict cookie: the page reloads itself
    from Quiver once, and the signed-in person sees the consent page, not a second sign-in."""
    suffix = uuid.uuid4().hex[:6]
    agent_name = f"front_{suffix}"
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as admin:
        assert (await admin.post("/api/v1/agents", json={"name": agent_name})).status_code == 201
        client = (
            await admin.post(
                "/oauth/register",
                json={"client_name": f"Elsewhere {suffix}", "redirect_uris": [CALLBACK]},
            )
        ).json()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": CALLBACK,
            "code_challenge": "A" * 43,
            "code_challenge_method": "S256",
            "resource": f"{console_url}/mcp/agents/{agent_name}",
        }
    )
    other_site = console_url.replace("127.0.0.1", "localhost") + "/start"
    context = await chromium.new_context()
    page = await context.new_page()
    await sign_in(page, console_url, ADMIN_TOKEN)
    await expect(page).to_have_url(f"{console_url}/ui/agents")

    async def start(route: Route, request: Request) -> None:
        link = f'<a id="go" href="{console_url}/oauth/authorize?{query}">Connect</a>'
        await route.fulfill(status=200, body=link, content_type="text/html")

    await page.route(other_site, start)
    await page.goto(other_site)
    await page.click("#go")
    await expect(page.get_by_test_id("consent-agent")).to_have_text(agent_name)
    await context.close()
