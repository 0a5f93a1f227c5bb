"""What the OAuth server refuses, against a live Quiver on Postgres: another audience, a wrong
PKCE verifier, an expired or reused code, a spent refresh token, requests that cannot go back
to the client, bad registrations; and that only hashes are stored."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from sqlalchemy import text

from app.config import Settings
from app.db.base import utcnow
from app.db.engine import create_engine
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import serve_app
from tests.fixtures.served import INITIALIZE
from tests.oauth.helpers import CALLBACK, authorize, code_of, pkce, register, sign_in, unique

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
async def base(committing_settings: Settings) -> AsyncIterator[str]:
    async with serve_app(create_app(committing_settings)) as url:
        yield url


@pytest.fixture(scope="module")
async def world(base: str) -> dict[str, Any]:
    """Two agents, a person's chat key, and a public client (no secret)."""
    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as admin:
        agents = []
        for prefix in ("tea", "coffee"):
            made = await admin.post("/api/v1/agents", json={"name": unique(prefix)})
            assert made.status_code == 201, made.text
            agents.append(made.json())
        key = await admin.post("/api/v1/api-keys", json={"name": unique("bob")})
        only_coffee = await admin.post(
            "/api/v1/api-keys",
            json={"name": unique("carol"), "agent_ids": [agents[1]["id"]]},
        )
        client = await register(
            admin,
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
        )
    return {
        "tea": agents[0]["name"],
        "coffee": agents[1]["name"],
        "key": key.json()["key"],
        "key_id": key.json()["id"],
        "coffee_key": only_coffee.json()["key"],
        "client_id": client["client_id"],
    }


@pytest.fixture
async def person(base: str, world: dict[str, Any]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        await sign_in(browser, world["key"])
        yield browser


def resource(base: str, agent: str) -> str:
    return f"{base}/mcp/agents/{agent}"


async def exchange(base: str, **form: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(f"{base}/oauth/token", data=form)


async def tokens(
    base: str, person: httpx.AsyncClient, world: dict[str, Any], agent: str = "tea"
) -> dict[str, Any]:
    verifier, challenge = pkce()
    code = code_of(
        await authorize(person, world["client_id"], resource(base, world[agent]), challenge)
    )
    answer = await exchange(
        base,
        grant_type="authorization_code",
        code=code,
        redirect_uri=CALLBACK,
        client_id=world["client_id"],
        code_verifier=verifier,
    )
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


async def mcp_status(url: str, token: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        headers = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
        return await http.post(url, json=INITIALIZE, headers=headers)


async def test_a_token_is_good_for_its_agent_endpoint_only(
    base: str, person: httpx.AsyncClient, world: dict[str, Any]
) -> None:
    issued = await tokens(base, person, world)
    ok = await mcp_status(resource(base, world["tea"]), issued["access_token"])
    assert ok.status_code == 200, ok.text
    other = await mcp_status(resource(base, world["coffee"]), issued["access_token"])
    assert other.status_code == 401
    assert "another resource" in other.json()["detail"]
    assert 'error="invalid_token"' in other.headers["www-authenticate"]
    # Not an API key either.
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        api = await http.get(
            "/api/v1/runs", headers={"Authorization": f"Bearer {issued['access_token']}"}
        )
    assert api.status_code == 401
    # A refresh that names another resource is refused (RFC 8707 invalid_target).
    moved = await exchange(
        base,
        grant_type="refresh_token",
        refresh_token=issued["refresh_token"],
        client_id=world["client_id"],
        resource=resource(base, world["coffee"]),
    )
    assert moved.status_code == 400
    assert moved.json()["error"] == "invalid_target"
    kept = await exchange(
        base,
        grant_type="refresh_token",
        refresh_token=issued["refresh_token"],
        client_id=world["client_id"],
        resource=resource(base, world["tea"]),
    )
    assert kept.status_code == 200, kept.text  # the refused request spent nothing


async def test_a_wrong_pkce_verifier_is_refused(
    base: str, person: httpx.AsyncClient, world: dict[str, Any]
) -> None:
    _, challenge = pkce()
    code = code_of(
        await authorize(person, world["client_id"], resource(base, world["tea"]), challenge)
    )
    wrong, _ = pkce()
    answer = await exchange(
        base,
        grant_type="authorization_code",
        code=code,
        redirect_uri=CALLBACK,
        client_id=world["client_id"],
        code_verifier=wrong,
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"
    missing = await exchange(
        base,
        grant_type="authorization_code",
        code=code,
        redirect_uri=CALLBACK,
        client_id=world["client_id"],
    )
    assert missing.status_code == 400


async def test_an_expired_code_is_refused(
    base: str,
    person: httpx.AsyncClient,
    world: dict[str, Any],
    committing_settings: Settings,
) -> None:
    verifier, challenge = pkce()
    code = code_of(
        await authorize(person, world["client_id"], resource(base, world["tea"]), challenge)
    )
    engine = create_engine(committing_settings)
    try:
        async with engine.begin() as conn:
            aged = await conn.execute(
                text("UPDATE oauth_codes SET expires_at = :past WHERE code_hash = :hash"),
                {
                    "past": utcnow() - timedelta(seconds=1),
                    "hash": hashlib.sha256(code.encode()).hexdigest(),
                },
            )
            assert aged.rowcount == 1  # stored by its hash only
    finally:
        await engine.dispose()
    answer = await exchange(
        base,
        grant_type="authorization_code",
        code=code,
        redirect_uri=CALLBACK,
        client_id=world["client_id"],
        code_verifier=verifier,
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"


async def test_a_reused_code_is_refused_and_revokes_what_it_issued(
    base: str, person: httpx.AsyncClient, world: dict[str, Any]
) -> None:
    verifier, challenge = pkce()
    code = code_of(
        await authorize(person, world["client_id"], resource(base, world["tea"]), challenge)
    )
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": CALLBACK,
        "client_id": world["client_id"],
        "code_verifier": verifier,
    }
    first = await exchange(base, **form)
    assert first.status_code == 200, first.text
    again = await exchange(base, **form)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    revoked = await mcp_status(resource(base, world["tea"]), first.json()["access_token"])
    assert revoked.status_code == 401


async def test_a_spent_refresh_token_ends_the_grant(
    base: str, person: httpx.AsyncClient, world: dict[str, Any]
) -> None:
    issued = await tokens(base, person, world)
    refresh = {
        "grant_type": "refresh_token",
        "refresh_token": issued["refresh_token"],
        "client_id": world["client_id"],
    }
    rotated = await exchange(base, **refresh)
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["refresh_token"] != issued["refresh_token"]
    replay = await exchange(base, **refresh)
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    # The replay ended the grant: the rotated tokens stop too.
    url = resource(base, world["tea"])
    assert (await mcp_status(url, rotated.json()["access_token"])).status_code == 401


async def test_authorization_requests_that_cannot_go_back_or_are_wrong(
    base: str, person: httpx.AsyncClient, world: dict[str, Any]
) -> None:
    _, challenge = pkce()
    tea = resource(base, world["tea"])
    unknown = await authorize(person, "no-such-client", tea, challenge)
    assert unknown.status_code == 400  # a page: never a redirect to an unverified URI
    assert "location" not in unknown.headers
    elsewhere = await authorize(
        person, world["client_id"], tea, challenge, redirect_uri="https://evil.example/cb"
    )
    assert elsewhere.status_code == 400
    assert "location" not in elsewhere.headers

    def error_of(response: httpx.Response) -> str:
        assert response.status_code in (302, 303), response.text
        return parse_qs(urlsplit(response.headers["location"]).query)["error"][0]

    no_resource = await person.get(
        "/oauth/authorize?"
        + urlencode(
            {
                "response_type": "code",
                "client_id": world["client_id"],
                "redirect_uri": CALLBACK,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": "s",
            }
        )
    )
    assert error_of(no_resource) == "invalid_target"
    other_host = await authorize(
        person, world["client_id"], "https://other.example/mcp/agents/x", challenge
    )
    assert error_of(other_host) == "invalid_target"
    plain = await authorize(
        person, world["client_id"], tea, challenge, code_challenge_method="plain"
    )
    assert error_of(plain) == "invalid_request"
    no_pkce = await person.get(
        "/oauth/authorize?"
        + urlencode(
            {
                "response_type": "code",
                "client_id": world["client_id"],
                "redirect_uri": CALLBACK,
                "resource": tea,
            }
        )
    )
    assert error_of(no_pkce) == "invalid_request"
    # The person says no.
    url = "/oauth/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": world["client_id"],
            "redirect_uri": CALLBACK,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": tea,
            "state": "s",
        }
    )
    page = await person.get(url)
    token = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    denied = await person.post(url, data={"csrf_token": token, "decision": "deny"})
    assert error_of(denied) == "access_denied"
    forged = await person.post(url, data={"csrf_token": "forged", "decision": "approve"})
    assert forged.status_code == 403


async def test_a_key_limited_to_other_agents_cannot_consent(
    base: str, world: dict[str, Any]
) -> None:
    _, challenge = pkce()
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        await sign_in(browser, world["coffee_key"])
        tea = await authorize(browser, world["client_id"], resource(base, world["tea"]), challenge)
        assert tea.status_code == 403
        assert "may not use" in tea.text


async def test_signing_in_comes_back_to_the_request(base: str, world: dict[str, Any]) -> None:
    _, challenge = pkce()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": world["client_id"],
            "redirect_uri": CALLBACK,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": resource(base, world["tea"]),
        }
    )
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        crossing = await browser.get(
            f"/oauth/authorize?{query}", headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert 'http-equiv="refresh"' in crossing.text  # reloaded same-site, with the cookie
        login = await browser.get(f"/oauth/authorize?{query}")
        assert 'data-testid="login-for-consent"' in login.text
        token = login.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        signed = await browser.post(
            "/ui/login",
            data={
                "api_key": world["key"],
                "csrf_token": token,
                "next": f"/oauth/authorize?{query}",
            },
        )
        assert signed.status_code == 303
        assert signed.headers["location"] == f"/oauth/authorize?{query}"
        consent = await browser.get(signed.headers["location"])
        assert 'data-testid="consent-approve"' in consent.text
        # Anywhere else is not a place a sign-in continues to.
        again = await browser.get("/ui/login")
        token = again.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        away = await browser.post(
            "/ui/login",
            data={"api_key": world["key"], "csrf_token": token, "next": "https://evil.example/"},
        )
        assert away.headers["location"] == "/ui/playground"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_client_metadata"),
        ({"redirect_uris": ["http://evil.example/cb"]}, "invalid_client_metadata"),
        ({"redirect_uris": []}, "invalid_client_metadata"),
        ({"client_name": "no redirect"}, "invalid_client_metadata"),
        ({"redirect_uris": [CALLBACK], "grant_types": ["password"]}, "invalid_client_metadata"),
        (
            {"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "private_key_jwt"},
            "invalid_client_metadata",
        ),
        (["not", "an", "object"], "invalid_request"),
    ],
)
async def test_bad_registrations_are_refused(base: str, body: Any, error: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(f"{base}/oauth/register", json=body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == error
        garbage = await http.post(
            f"{base}/oauth/register", content=b"{", headers={"Content-Type": "application/json"}
        )
        assert garbage.status_code == 400


async def test_revoking_the_persons_key_ends_its_oauth_access(
    base: str, world: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as admin:
        made = (await admin.post("/api/v1/api-keys", json={"name": unique("dave")})).json()
        async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
            await sign_in(browser, made["key"])
            issued = await tokens(base, browser, world)
        url = resource(base, world["tea"])
        assert (await mcp_status(url, issued["access_token"])).status_code == 200
        assert (await admin.delete(f"/api/v1/api-keys/{made['id']}")).status_code == 204
    assert (await mcp_status(url, issued["access_token"])).status_code == 401


@pytest.mark.parametrize(
    ("path", "kwargs", "error"),
    [
        ("/oauth/token", {}, "unsupported_grant_type"),
        ("/oauth/token", {"json": {"grant_type": "authorization_code"}}, "unsupported_grant_type"),
        ("/oauth/token", {"data": {"grant_type": "password"}}, "unsupported_grant_type"),
        ("/oauth/token", {"data": {"grant_type": "authorization_code"}}, "invalid_client"),
        (
            "/oauth/token",
            {"data": {"grant_type": "refresh_token", "client_id": "nobody", "refresh_token": "x"}},
            "invalid_client",
        ),
        ("/oauth/revoke", {"data": {"token": "x"}}, "invalid_client"),
        ("/oauth/token", {"content": b"\xff\xfe", "headers": {"Content-Type": "text/plain"}}, None),
    ],
)
async def test_bad_token_requests_answer_4xx(
    base: str, path: str, kwargs: dict[str, Any], error: str | None
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        answer = await http.post(f"{base}{path}", **kwargs)
    assert 400 <= answer.status_code < 500, answer.text
    if error is not None:
        assert answer.json()["error"] == error


async def test_a_signed_in_person_sees_a_page_for_a_malformed_request(
    person: httpx.AsyncClient,
) -> None:
    for query in ("", "?response_type=token&client_id=x", "?response_type=code"):
        answer = await person.get(f"/oauth/authorize{query}")
        assert answer.status_code == 400, answer.text
        assert "location" not in answer.headers


async def test_only_hashes_of_tokens_are_stored(
    base: str,
    person: httpx.AsyncClient,
    world: dict[str, Any],
    committing_settings: Settings,
) -> None:
    issued = await tokens(base, person, world)
    engine = create_engine(committing_settings)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT * FROM oauth_tokens"))).mappings().all()
    finally:
        await engine.dispose()
    dumped = repr([dict(r) for r in rows])
    assert issued["access_token"] not in dumped
    assert issued["refresh_token"] not in dumped
    digest = hashlib.sha256(issued["access_token"].encode()).hexdigest()
    (row,) = [r for r in rows if r["access_hash"] == digest]
    assert row["resource"] == resource(base, world["tea"])
    assert row["api_key_id"] is not None


async def test_the_persons_rate_limit_holds_for_their_oauth_sessions(
    base: str, world: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as admin:
        made = await admin.post(
            "/api/v1/api-keys", json={"name": unique("erin"), "rate_limit_per_minute": 1}
        )
        assert made.status_code == 201, made.text
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        await sign_in(browser, made.json()["key"])
        issued = await tokens(base, browser, world)
    url = resource(base, world["tea"])
    assert (await mcp_status(url, issued["access_token"])).status_code == 200
    limited = await mcp_status(url, issued["access_token"])
    assert limited.status_code == 429
    assert "per minute" in limited.json()["detail"]
