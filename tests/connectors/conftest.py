"""Fixtures: a real HTTP server on 127.0.0.1, a guarded client and a connector executor."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.connectors.execute import ConnectorExecutor
from app.connectors.models import Connector, ConnectorAction
from app.main import create_app
from app.security.egress import new_http_client
from tests.conftest import ADMIN_TOKEN
from tests.connectors.server_app import LocalServer


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    srv = LocalServer().start()
    yield srv
    srv.stop()


@pytest.fixture
async def loopback_client(committing_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app with loopback egress open: the recording server lives on 127.0.0.1."""
    settings = committing_settings.model_copy(update={"egress_allow_cidrs": ["127.0.0.0/8"]})
    app = create_app(settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=120,
        ) as http,
    ):
        yield http


@pytest.fixture(scope="module")
def local_settings() -> Settings:
    """Only this suite opens loopback: the server under test lives there."""
    return Settings(egress_allow_cidrs=["127.0.0.0/8"], http_max_response_bytes=65_536)


@pytest.fixture(scope="module")
async def http(local_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with new_http_client(local_settings) as client:
        yield client


@pytest.fixture
async def executor(
    http: httpx.AsyncClient, local_settings: Settings
) -> AsyncIterator[ConnectorExecutor]:
    ex = ConnectorExecutor(
        http=http,
        settings=local_settings,
        audit=None,
        breaker_threshold=3,
        breaker_cooldown_s=0.3,
        retry_backoff_s=0.01,
    )
    yield ex
    await ex.aclose()


def make_connector(base_url: str, *, name: str = "svc", **kw: Any) -> Connector:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "name": name,
        "description": "",
        "base_url": base_url,
        "auth_type": "none",
        "auth_config": {},
        "credentials": None,
        "timeout_s": 5.0,
    }
    values.update(kw)
    return Connector(**values)


def make_action(
    name: str = "act",
    *,
    method: str = "GET",
    path: str = "/echo",
    parameters: dict[str, Any] | None = None,
    **kw: Any,
) -> ConnectorAction:
    return ConnectorAction(
        id=uuid.uuid4(),
        name=name,
        description="",
        method=method,
        path=path,
        parameters=parameters or {"type": "object", "properties": {}},
        body_template=kw.pop("body_template", None),
        requires_confirmation=kw.pop("requires_confirmation", False),
        **kw,
    )
