from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.pipeline.sources.backends import Backends
from tests.fixtures.pipeline import Recorders, make_backends, make_settings


@pytest.fixture(scope="session")
async def pipeline_http() -> AsyncIterator[httpx.AsyncClient]:
    """One client for the whole session: building its TLS context costs ~0.3 s."""
    async with httpx.AsyncClient() as http:
        yield http


@pytest.fixture
def rec() -> Recorders:
    return Recorders()


@pytest.fixture
def backends(rec: Recorders, pipeline_http: httpx.AsyncClient) -> Backends:
    return make_backends(make_settings(), pipeline_http, rec)
