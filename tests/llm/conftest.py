from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from app.llm.client import LlmClient
from tests.fixtures.scripted_llm import (
    ScriptedLLM,
    scripted_llm,
    scripted_llm_factory,
    scripted_llm_session,
)

__all__ = ["scripted_llm", "scripted_llm_factory", "scripted_llm_session"]

API_KEY = "sk-test-SECRET-4f9a2b7c"

ClientFactory = Callable[..., LlmClient]


@pytest.fixture
def make_client(llm_session: aiohttp.ClientSession) -> ClientFactory:
    """Build LlmClients on the shared session, with fast backoff by default."""

    def factory(server: ScriptedLLM | None = None, **overrides: Any) -> LlmClient:
        options: dict[str, Any] = {
            "base_url": server.base_url if server is not None else "http://127.0.0.1:9/v1",
            "api_key": API_KEY,
            "model": "test-model",
            "timeout_s": 5.0,
            "max_retries": 2,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            "session": llm_session,
        }
        options.update(overrides)
        return LlmClient(**options)

    return factory
