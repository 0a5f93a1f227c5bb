"""What the OAuth tests share: a person's signed-in console (plain HTTP form posts, as a
browser sends them), the `mcp` SDK's token storage, and raw token-endpoint calls."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
CALLBACK = "http://127.0.0.1:9/callback"
"""The client's redirect URI; nothing listens there: the test reads the redirect's Location."""


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class MemoryStorage:
    """`mcp.client.auth.TokenStorage` in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def csrf(html: str) -> str:
    found = CSRF.search(html)
    assert found, html[:2000]
    return found.group(1)


async def sign_in(browser: httpx.AsyncClient, key: str) -> None:
    form = await browser.get("/ui/login")
    signed = await browser.post("/ui/login", data={"api_key": key, "csrf_token": csrf(form.text)})
    assert signed.status_code == 303, signed.text


@dataclass
class Person:
    """A person in a browser, signed in to the console, who approves (or denies) requests."""

    browser: httpx.AsyncClient
    approve: bool = True
    seen: list[str] = field(default_factory=list)
    """The consent pages shown."""
    results: list[AuthorizationCodeResult] = field(default_factory=list)

    async def redirect_handler(self, authorization_url: str) -> None:
        page = await self.browser.get(authorization_url)
        assert page.status_code == 200, page.text
        self.seen.append(page.text)
        decided = await self.browser.post(
            authorization_url,
            data={"csrf_token": csrf(page.text), "decision": "approve" if self.approve else "deny"},
        )
        assert decided.status_code == 302, decided.text
        query = parse_qs(urlsplit(decided.headers["location"]).query)
        assert "code" in query, query
        self.results.append(
            AuthorizationCodeResult(
                code=query["code"][0], state=query.get("state", [None])[0], iss=None
            )
        )

    async def callback_handler(self) -> AuthorizationCodeResult:
        return self.results[-1]


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


async def register(http: httpx.AsyncClient, **metadata: Any) -> dict[str, Any]:
    body = {"redirect_uris": [CALLBACK], "client_name": "negative tests"} | metadata
    response = await http.post("/oauth/register", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def authorize(
    person: httpx.AsyncClient, client_id: str, resource: str, challenge: str, **extra: str
) -> httpx.Response:
    """The person approves an authorization request; the answer is the redirect."""
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "state": "st",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
        "scope": "mcp",
    } | extra
    url = "/oauth/authorize?" + urlencode(params)
    page = await person.get(url)
    if page.status_code != 200:
        return page
    return await person.post(url, data={"csrf_token": csrf(page.text), "decision": "approve"})


def code_of(redirect: httpx.Response) -> str:
    assert redirect.status_code == 302, redirect.text
    query = parse_qs(urlsplit(redirect.headers["location"]).query)
    assert "code" in query, query
    return query["code"][0]
