"""Fixtures shared by the endpoint's answer tests: a live app on either store, and an HTTP
MCP server for its agents to call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.db.migrate import upgrade
from app.main import create_app
from tests.conftest import ADMIN_TOKEN, SECRET_KEY
from tests.fixtures.database import migrated_postgres
from tests.fixtures.live import serve_app
from tests.fixtures.stores import STORES
from tests.mcp.servers import HttpMcpServer


def app_fields(tmp_path: Path) -> dict[str, Any]:
    return {
        "secret_keys": [SECRET_KEY],
        "admin_token": ADMIN_TOKEN,
        "data_dir": tmp_path,
        "egress_allow_cidrs": ["127.0.0.0/8"],  # the test MCP server lives there
    }


@pytest.fixture(scope="module")
def upstream() -> Iterator[HttpMcpServer]:
    server = HttpMcpServer("streamable-http").start()
    yield server
    server.stop()


@pytest.fixture(params=STORES)
async def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, Settings]]:
    """The app served on each store: (its URL, its settings)."""
    fields = app_fields(tmp_path)
    if request.param == "postgres":
        async with migrated_postgres(fields) as settings, serve_app(create_app(settings)) as url:
            yield url, settings
        return
    settings = Settings.model_validate(
        {**fields, "database_url": f"sqlite:///{tmp_path / 'quiver.db'}"}
    )
    await asyncio.to_thread(upgrade, settings)
    async with serve_app(create_app(settings)) as url:
        yield url, settings
