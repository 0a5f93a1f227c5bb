"""Schemathesis over the whole `/openapi.json`, on SQLite and on PostgreSQL.

A real uvicorn server per store (127.0.0.1, random port), the admin key, a fixed seed and a few
examples per operation, valid and invalid ones (NUL characters included). Every response must be
no 5xx, match its declared schema and have a declared status code. Chat runs against the scripted
LLM (generated agent ids are unknown, so no run starts and nothing calls out).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from app.config import Settings
from app.db.migrate import upgrade
from app.main import create_app
from tests.conftest import ADMIN_TOKEN, SECRET_KEY
from tests.fixtures.database import migrated_postgres
from tests.fixtures.scripted_llm import ScriptedLLM
from tests.fixtures.threaded_server import ThreadedServer

EXAMPLES_PER_OPERATION = 4
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance]
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 20261201,
        "generation": {"mode": "all", "max-examples": EXAMPLES_PER_OPERATION, "database": "none"},
    }
)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def store_settings(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    scripted_llm_session: ScriptedLLM,
) -> AsyncIterator[Settings]:
    common = {
        "secret_keys": [SECRET_KEY],
        "admin_token": ADMIN_TOKEN,
        "data_dir": tmp_path_factory.mktemp("fuzz"),
        "llm_base_url": scripted_llm_session.base_url,
    }
    if request.param == "postgres":
        async with migrated_postgres(common) as pg:
            yield pg
        return
    data_dir = common["data_dir"]
    assert isinstance(data_dir, Path)
    sqlite = Settings.model_validate({**common, "database_url": f"sqlite:///{data_dir}/q.db"})
    await asyncio.to_thread(upgrade, sqlite)
    yield sqlite


@pytest.fixture(scope="module")
def base_url(store_settings: Settings) -> Iterator[str]:
    server = ThreadedServer("quiver-fuzz")
    server.start(create_app(store_settings), lifespan="on")
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def http(base_url: str) -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


def _document() -> dict[str, object]:
    """The document the server serves at `/openapi.json` (it does not depend on the store).

    Loaded eagerly: schemathesis' fixture-based loading relies on a pytest private attribute
    that pytest 9 no longer has."""
    app = create_app(Settings(secret_keys=[SECRET_KEY], admin_token=ADMIN_TOKEN))
    return app.openapi()


schema = schemathesis.openapi.from_dict(_document(), config=CONFIG)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_server_error_and_conformance(
    case: schemathesis.Case, base_url: str, http: requests.Session
) -> None:
    case.call_and_validate(
        base_url=base_url,
        session=http,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        checks=CHECKS,
    )
