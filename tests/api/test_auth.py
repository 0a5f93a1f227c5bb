"""Every route under /api/v1 is guarded, found by walking the app (a new route is covered too)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.apikeys.auth import require_admin, require_chat
from app.apikeys.schemas import ApiKeyCreate
from app.apikeys.service import api_key_service
from app.config import Settings
from app.main import create_app
from tests.fixtures.crud import assert_error

API_PREFIX = "/api/v1/"
_PARAM = re.compile(r"\{[^}]+\}")
_SCOPES: dict[Callable[..., Any], str] = {require_admin: "admin", require_chat: "chat"}


@dataclass(frozen=True)
class ApiRoute:
    method: str
    path: str
    scope: str | None
    """`admin` or `chat` from the route's dependency tree; None = unguarded."""

    @property
    def url(self) -> str:
        return _PARAM.sub(lambda _: str(uuid.uuid4()), self.path)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def _dependency_calls(dependant: Any) -> Iterator[Callable[..., Any]]:
    for dep in dependant.dependencies:
        if dep.call is not None:
            yield dep.call
        yield from _dependency_calls(dep)


def api_routes(app: FastAPI) -> list[ApiRoute]:
    routes = []
    for route in iter_route_contexts(app.routes):
        path = route.path_format or route.path or ""  # `{id}`, not its convertor `{id:item}`
        if not path.startswith(API_PREFIX):
            continue
        calls = set(_dependency_calls(route.dependant))
        scopes = {scope for call, scope in _SCOPES.items() if call in calls}
        scope = "admin" if "admin" in scopes else next(iter(scopes), None)
        routes.extend(ApiRoute(m, path, scope) for m in sorted(route.methods or ()) if m != "HEAD")
    return routes


async def _request(client: httpx.AsyncClient, route: ApiRoute, key: str | None) -> httpx.Response:
    headers = {"Authorization": key} if key is not None else {}
    # ASGITransport has no timeouts: a route that hangs fails here instead of stalling the suite.
    return await asyncio.wait_for(
        client.request(route.method, route.url, headers=headers, json={}), timeout=20
    )


async def _chat_key(sessionmaker: async_sessionmaker[AsyncSession]) -> str:
    async with sessionmaker() as session:
        _, key = await api_key_service.create(
            session, ApiKeyCreate(name="chat only", scopes=["chat"])
        )
        await session.commit()
    return key


async def test_the_route_walk_sees_every_domain(app: FastAPI) -> None:
    paths = {route.path for route in api_routes(app)}
    for resource in ("agents", "connectors", "databases", "mcp-servers", "skills", "conventions"):
        assert f"/api/v1/{resource}/{{id}}" in paths
    assert "/api/v1/api-keys" in paths
    assert len(api_routes(app)) >= 40


async def test_every_api_route_declares_a_scope(app: FastAPI) -> None:
    unguarded = [str(route) for route in api_routes(app) if route.scope is None]
    assert unguarded == [], f"routes without require_admin/require_chat: {unguarded}"


async def test_every_api_route_needs_a_valid_key(
    app: FastAPI, anon_client: httpx.AsyncClient
) -> None:
    failures = []
    for route in api_routes(app):
        for key in (None, "Bearer qv_not_a_real_key", "Basic dXNlcjpwYXNz", "Bearer ", "qv_raw"):
            resp = await _request(anon_client, route, key)
            refusal = (resp.status_code, resp.json().get("error"))
            # past QUIVER_AUTH_FAIL_LIMIT wrong keys from this address: throttled, still refused
            if refusal not in ((401, "Unauthorized"), (429, "RateLimited")):
                failures.append(f"{route} with {key!r}: {resp.status_code} {resp.text[:80]}")
    assert failures == []


async def test_chat_key_is_forbidden_on_admin_routes(
    app: FastAPI,
    anon_client: httpx.AsyncClient,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    chat = f"Bearer {await _chat_key(sessionmaker)}"
    admin_routes = [r for r in api_routes(app) if r.scope == "admin"]
    assert admin_routes
    failures = []
    for route in admin_routes:
        resp = await _request(anon_client, route, chat)
        if resp.status_code != 403 or resp.json() != {
            "error": "Forbidden",
            "detail": "this route needs an API key with scope 'admin'",
        }:
            failures.append(f"{route}: {resp.status_code} {resp.text[:80]}")
    assert failures == []


async def test_chat_key_passes_the_guard_on_chat_routes(
    app: FastAPI,
    anon_client: httpx.AsyncClient,
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    chat = f"Bearer {await _chat_key(sessionmaker)}"
    failures = []
    for route in (r for r in api_routes(app) if r.scope == "chat"):
        resp = await _request(anon_client, route, chat)
        if resp.status_code in (401, 403) or resp.status_code >= 500:
            failures.append(f"{route}: {resp.status_code} {resp.text[:80]}")
    assert failures == []


async def test_an_unguarded_route_would_be_caught(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    """The walk is not a hard-coded list: a route added without a scope shows up at once."""
    app = create_app(settings, sessionmaker=sessionmaker)

    async def leaky() -> dict[str, str]:
        return {"secret": "data"}

    app.router.add_api_route("/api/v1/leaky", leaky, methods=["GET"])
    assert [str(r) for r in api_routes(app) if r.scope is None] == ["GET /api/v1/leaky"]
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://quiver.test"
        ) as anon,
    ):
        # only the key's presence is checked up front; the route itself verifies nothing
        leaked = await anon.get("/api/v1/leaky", headers={"Authorization": "Bearer not-a-key"})
        assert leaked.status_code == 200


async def test_health_probes_are_open(anon_client: httpx.AsyncClient) -> None:
    health = await anon_client.get("/healthz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    ready = await anon_client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


async def test_metrics_expose_prometheus_text(
    anon_client: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    await client.get("/api/v1/skills")
    assert_error(await anon_client.get("/api/v1/skills"), 401, "Unauthorized")
    resp = await anon_client.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert "# TYPE quiver_http_requests_total counter" in text
    assert (
        'quiver_http_requests_total{method="GET",route="/api/v1/skills",status="200"} 1.0' in text
    )
    assert (
        'quiver_http_requests_total{method="GET",route="/api/v1/skills",status="401"} 1.0' in text
    )
    assert "# TYPE quiver_http_request_seconds histogram" in text
    assert "quiver_runs_total" in text


async def test_responses_carry_a_request_id(anon_client: httpx.AsyncClient) -> None:
    resp = await anon_client.get("/healthz", headers={"x-request-id": "req-123"})
    assert resp.headers["x-request-id"] == "req-123"
    generated = (await anon_client.get("/healthz")).headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)


async def test_missing_key_is_401_even_with_a_malformed_body(
    anon_client: httpx.AsyncClient,
) -> None:
    resp = await anon_client.post(
        "/api/v1/agents", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert resp.status_code == 401
    assert resp.json()["error"] == "Unauthorized"
