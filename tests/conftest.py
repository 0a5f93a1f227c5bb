"""Shared fixtures: real Postgres (throwaway database, Alembic head), per-test rollback."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI
from fastapi.dependencies import models as fastapi_dependency_models
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import create_engine
from app.db.migrate import upgrade
from app.llm.transport import model_session
from app.main import create_app
from app.security.crypto import configure_keys
from tests.fixtures.database import migrated_postgres

pytest_plugins = ["tests.fixtures.scripted_llm", "tests.fixtures.backends"]

ADMIN_TOKEN = "qv_test_admin_token_0123456789"
SECRET_KEY = Fernet.generate_key().decode()


async def migrated_sqlite(data_dir: Path, **overrides: Any) -> Settings:
    """Settings of a SQLite store in `data_dir`, migrated to head (the tests' keys and token)."""
    settings = Settings.model_validate(
        {
            "database_url": "",
            "data_dir": data_dir,
            "admin_token": ADMIN_TOKEN,
            "secret_keys": [SECRET_KEY],
            **overrides,
        }
    )
    await asyncio.to_thread(upgrade, settings)
    return settings


# FastAPI keeps three caches of 4,096 route callables (is it a coroutine, a generator...): in a
# server that is one app's routes; in this suite every app a test builds stays alive through them,
# ~240k objects each, and the cyclic collector's full passes over millions of objects stopped the
# test process (and the servers it runs in threads) for 1-4 s at a time late in the suite.
FASTAPI_CALLABLE_CACHES = (
    "_is_gen_callable_cached",
    "_is_async_gen_callable_cached",
    "_is_coroutine_callable_cached",
)


@pytest.fixture(autouse=True, scope="module")
def release_finished_apps() -> Iterator[None]:
    """After each module, let go of the apps its tests built (see FASTAPI_CALLABLE_CACHES).

    Before each module, what survives a collection is frozen (`gc.freeze`, as `quiver serve`
    does at start): the collector's full passes then walk only what this module made, so a server
    a test runs in a thread of this process is never stopped for seconds by a walk over the
    whole suite's heap."""
    gc.collect()
    gc.freeze()
    yield
    for name in FASTAPI_CALLABLE_CACHES:
        cache = getattr(fastapi_dependency_models, name, None)
        if cache is not None:
            cache.cache_clear()


@pytest.fixture(scope="session")
async def llm_session() -> AsyncIterator[aiohttp.ClientSession]:
    """One model session the tests' `LlmClient`s share, as the app's runs share theirs."""
    async with model_session() as session:
        yield session


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("quiver-data")


@pytest.fixture(scope="session")
async def settings(data_dir: Path) -> AsyncIterator[Settings]:
    configure_keys([SECRET_KEY])
    async with migrated_postgres(
        {
            "secret_keys": [SECRET_KEY],
            "admin_token": ADMIN_TOKEN,
            "data_dir": data_dir,
            # stdio commands are checked at create: the one the CRUD tests store
            "mcp_stdio_commands": ["mcp-server-time"],
        }
    ) as s:
        yield s


@pytest.fixture(scope="session")
async def committing_settings(data_dir: Path) -> AsyncIterator[Settings]:
    """A second throwaway database for apps that commit (live servers, background writers),
    so their rows never show up in the rolled-back tests' counts."""
    async with migrated_postgres(
        {"secret_keys": [SECRET_KEY], "admin_token": ADMIN_TOKEN, "data_dir": data_dir}
    ) as s:
        yield s


@pytest.fixture(scope="session")
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(settings)
    yield eng
    await eng.dispose()


@pytest.fixture
async def sessionmaker(engine: AsyncEngine) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions joined to an outer transaction that is rolled back after the test."""
    async with engine.connect() as conn:
        outer = await conn.begin()
        yield async_sessionmaker(
            bind=conn, expire_on_commit=False, join_transaction_mode="create_savepoint"
        )
        await outer.rollback()


@pytest.fixture
async def session(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    async with sessionmaker() as s:
        yield s


@pytest.fixture
async def app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[FastAPI]:
    application = create_app(settings, sessionmaker=sessionmaker)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://quiver.test",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ) as c:
        yield c


@pytest.fixture
async def anon_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://quiver.test"
    ) as c:
        yield c
