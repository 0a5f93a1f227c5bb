"""Console sign-in, cookies, CSRF and what a chat key may open (ASGI, no browser)."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import ADMIN_TOKEN

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A cookie-keeping client with no Authorization header (like a browser)."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://quiver.test"
    ) as c:
        yield c


async def sign_in(browser: httpx.AsyncClient, key: str) -> httpx.Response:
    form = await browser.get("/ui/login")
    token = TOKEN.search(form.text)
    assert token is not None
    return await browser.post("/ui/login", data={"api_key": key, "csrf_token": token.group(1)})


FLASH = re.compile(r'data-testid="(notice|error)">([^<]*)<')


async def outcome(browser: httpx.AsyncClient, response: httpx.Response) -> tuple[str, str]:
    """Follow a form's 303 and read the page's notice or error: (kind, text)."""
    assert response.status_code == 303, response.text
    shown = await browser.get(response.headers["location"])
    found = FLASH.search(shown.text)
    assert found is not None, shown.text[:800]
    return found.group(1), html.unescape(found.group(2))


def page_token(response: httpx.Response) -> str:
    found = TOKEN.search(response.text)
    assert found is not None, response.text[:500]
    return found.group(1)


async def chat_key(client: httpx.AsyncClient) -> str:
    created = await client.post("/api/v1/api-keys", json={"name": "ui-chat", "scopes": ["chat"]})
    assert created.status_code == 201, created.text
    key: str = created.json()["key"]
    return key


async def test_pages_redirect_to_sign_in_without_a_session(browser: httpx.AsyncClient) -> None:
    for path in ("/ui", "/ui/agents", "/ui/resources", "/ui/playground", "/ui/runs"):
        response = await browser.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"] == "/ui/login"


async def test_sign_in_sets_a_strict_http_only_cookie_without_the_key(
    browser: httpx.AsyncClient,
) -> None:
    response = await sign_in(browser, ADMIN_TOKEN)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/agents"
    cookie = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith("quiver_console=")
    )
    lowered = cookie.lower()
    assert "httponly" in lowered
    assert "samesite=strict" in lowered
    assert "path=/" in lowered
    assert "secure" not in lowered  # plain HTTP here
    assert ADMIN_TOKEN not in cookie
    agents = await browser.get("/ui/agents")
    assert agents.status_code == 200
    assert ADMIN_TOKEN not in agents.text
    assert "default-src 'self'" in agents.headers["content-security-policy"]


async def test_cookie_is_secure_over_https(app: FastAPI) -> None:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="https://quiver.test"
    ) as https:
        response = await sign_in(https, ADMIN_TOKEN)
    cookie = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith("quiver_console=")
    )
    assert "secure" in cookie.lower()


async def test_sign_in_needs_the_form_token_and_a_valid_key(browser: httpx.AsyncClient) -> None:
    await browser.get("/ui/login")
    forged = await browser.post("/ui/login", data={"api_key": ADMIN_TOKEN, "csrf_token": "x"})
    assert forged.status_code == 403
    assert (await browser.post("/ui/login", data={"api_key": ADMIN_TOKEN})).status_code == 403
    assert (await browser.post("/ui/login", data={})).status_code == 403
    assert "quiver_console=" not in forged.headers.get("set-cookie", "")
    wrong = await sign_in(browser, "qv_not_a_key")
    assert wrong.status_code == 401
    assert "invalid or revoked" in wrong.text
    assert "qv_not_a_key" not in wrong.text


async def test_forms_without_the_csrf_token_are_refused(
    browser: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    await sign_in(browser, ADMIN_TOKEN)
    refused = await browser.post("/ui/agents", data={"name": "nope", "csrf_token": "wrong"})
    assert refused.status_code == 403
    assert refused.json()["error"] == "Forbidden"
    missing = await browser.post("/ui/agents", data={"name": "nope"})
    assert (missing.status_code, missing.json()["error"]) == (403, "Forbidden")
    # without the token and without the form's required fields: still the CSRF refusal
    bare = await browser.post("/ui/agents", data={})
    assert (bare.status_code, bare.json()["error"]) == (403, "Forbidden")
    assert (await browser.post("/ui/logout", data={})).status_code == 403
    assert (await client.get("/api/v1/agents")).json()["total"] == 0
    page = await browser.get("/ui/agents")
    created = await browser.post(
        "/ui/agents", data={"name": "via_ui", "csrf_token": page_token(page)}
    )
    assert await outcome(browser, created) == ("notice", "agent via_ui created")
    assert (await client.get("/api/v1/agents")).json()["items"][0]["name"] == "via_ui"


async def test_signing_in_again_replaces_the_old_session(browser: httpx.AsyncClient) -> None:
    await sign_in(browser, ADMIN_TOKEN)
    first = browser.cookies.get("quiver_console")
    await sign_in(browser, ADMIN_TOKEN)
    second = browser.cookies.get("quiver_console")
    assert first
    assert second
    assert first != second
    browser.cookies.set("quiver_console", first)
    assert (await browser.get("/ui/agents")).status_code == 303


async def test_sign_out_ends_the_session_server_side(browser: httpx.AsyncClient) -> None:
    await sign_in(browser, ADMIN_TOKEN)
    page = await browser.get("/ui/agents")
    old_cookie = browser.cookies.get("quiver_console")
    out = await browser.post("/ui/logout", data={"csrf_token": page_token(page)})
    assert out.status_code == 303
    assert out.headers["location"] == "/ui/login"
    browser.cookies.set("quiver_console", old_cookie or "")
    again = await browser.get("/ui/agents")
    assert again.status_code == 303  # the old cookie no longer names a session


async def test_a_chat_key_sees_the_playground_and_runs_only(
    browser: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    response = await sign_in(browser, await chat_key(client))
    assert response.headers["location"] == "/ui/playground"
    for path in ("/ui/playground", "/ui/runs", "/ui/tool-calls"):
        assert (await browser.get(path)).status_code == 200, path
    for path in ("/ui/agents", "/ui/resources"):
        refused = await browser.get(path)
        assert refused.status_code == 403, path
        assert 'data-testid="forbidden"' in refused.text
    page = await browser.get("/ui/playground")
    import_attempt = await browser.post(
        "/ui/resources/skills/import",
        data={
            "document": "---\nname: x\ndescription: y\n---\nbody",
            "csrf_token": page_token(page),
        },
    )
    assert import_attempt.status_code == 403
    assert (await client.get("/api/v1/skills")).json()["total"] == 0


async def test_the_api_takes_the_session_only_with_its_csrf_header(
    browser: httpx.AsyncClient,
) -> None:
    await sign_in(browser, ADMIN_TOKEN)
    page = await browser.get("/ui/agents")
    token = page_token(page)
    assert (await browser.get("/api/v1/runs")).status_code == 401
    bad = await browser.get("/api/v1/runs", headers={"X-CSRF-Token": "forged"})
    assert bad.status_code == 401
    good = await browser.get("/api/v1/runs", headers={"X-CSRF-Token": token})
    assert good.status_code == 200
    # admin-scope routes never accept the console cookie, even from an admin session
    admin_route = await browser.get("/api/v1/agents", headers={"X-CSRF-Token": token})
    assert admin_route.status_code == 401


async def test_import_forms_report_bad_documents_without_writing(
    browser: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    await sign_in(browser, ADMIN_TOKEN)
    token = page_token(await browser.get("/ui/resources"))
    bad = await browser.post(
        "/ui/resources/connectors/import",
        data={"document": "openapi: 2.0\n", "csrf_token": token},
    )
    kind, _ = await outcome(browser, bad)
    assert kind == "error"
    again = await browser.get("/ui/resources")
    assert 'data-testid="error"' not in again.text  # shown once
    assert (await client.get("/api/v1/connectors")).json()["total"] == 0
    good = await browser.post(
        "/ui/resources/connectors/import",
        data={"csrf_token": token, "name": "mini"},
        files={"file": ("mini.yaml", MINI_OPENAPI.encode(), "application/yaml")},
    )
    assert good.status_code == 303, good.text
    assert "?" not in good.headers["location"]  # nothing in the address
    detail = await browser.get(good.headers["location"])
    assert "connector mini imported with 1 actions" in detail.text
    assert detail.status_code == 200
    assert detail.text.count('data-testid="action-row"') == 1
    assert (await client.get("/api/v1/connectors")).json()["items"][0]["name"] == "mini"


MINI_OPENAPI = """openapi: 3.0.3
info: {title: Mini, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /ping:
    get: {operationId: ping, responses: {"200": {description: ok}}}
"""


async def test_unknown_ids_are_pages_and_uploads_are_checked(
    browser: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    await sign_in(browser, ADMIN_TOKEN)
    missing = await browser.get("/ui/agents/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404
    assert "text/html" in missing.headers["content-type"]
    assert "not found" in missing.text
    api_missing = await client.get("/api/v1/agents/00000000-0000-0000-0000-000000000000")
    assert api_missing.json()["error"] == "NotFound"  # the API keeps its JSON shape
    token = page_token(await browser.get("/ui/resources"))
    binary = await browser.post(
        "/ui/resources/skills/import",
        data={"csrf_token": token},
        files={"file": ("SKILL.md", b"\xff\xfe\x00bad", "text/markdown")},
    )
    assert await outcome(browser, binary) == ("error", "file: not UTF-8 text")
    assert (await client.get("/api/v1/skills")).json()["total"] == 0
