"""The loop takes the run's resolved configuration and yields a `RunResult` last."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

import aiohttp

from app.agents.models import Agent
from app.chat.loop import ReactRun, RunDeps, RunInput, RunResult
from app.events import RunFailed, RunFinished
from app.llm.client import LlmClient
from app.llm.types import Completion, TextDelta
from app.pipeline.mode import RunConfig, run_config
from app.pipeline.sources.backends import Backends
from tests.fixtures.catalog import full_agent
from tests.fixtures.pipeline import make_settings
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

SEARCH = {
    "subcommand": "execute",
    "connector": "jira",
    "action": "search_issues",
    "parameters": {"jql": "project = OPS"},
}


class BrokenLlm(LlmClient):
    """A client with a bug: its stream fails with an error the loop does not expect."""

    async def stream_chat(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> AsyncGenerator[TextDelta | Completion, None]:
        raise RuntimeError("boom")
        yield  # pragma: no cover - makes this an async generator


def llm(
    server: ScriptedLLM, session: aiohttp.ClientSession, cls: type[LlmClient] = LlmClient
) -> Any:
    return cls(
        base_url=server.base_url,
        api_key="k",
        model="m",
        timeout_s=5,
        max_retries=0,
        session=session,
    )


async def run_all(
    client: LlmClient, backends: Backends, agent: Agent, config: RunConfig
) -> list[Any]:
    deps = RunDeps(settings=make_settings(), backends=backends, llm=client, cancel=asyncio.Event())
    inp = RunInput(run_id="run-1", conversation_id="conv-1", agent=agent, message="OPS issues?")
    return [item async for item in ReactRun(deps=deps, inp=inp).events(config)]


async def test_the_result_comes_last_with_the_new_messages(
    scripted_llm: ScriptedLLM, llm_session: aiohttp.ClientSession, backends: Backends
) -> None:
    scripted_llm.script(Turn(tool_calls=[("c1", "connector", SEARCH)]), Turn(text="two issues"))
    agent = full_agent()
    items = await run_all(
        llm(scripted_llm, llm_session), backends, agent, run_config(None, make_settings())
    )
    result = items[-1]
    assert isinstance(result, RunResult)
    assert isinstance(items[-2], RunFinished)
    assert items[-2].status == "completed"
    assert (result.status, result.iterations) == ("completed", 2)
    assert [m.role for m in result.new_messages] == ["user", "assistant", "tool", "assistant"]
    assert not any(isinstance(i, RunResult) for i in items[:-1])


async def test_the_config_passed_in_governs_the_run(
    scripted_llm: ScriptedLLM, llm_session: aiohttp.ClientSession, backends: Backends
) -> None:
    scripted_llm.script(Turn(tool_calls=[("c1", "connector", SEARCH)]), Turn(text="two issues"))
    agent = full_agent()  # stored config: the default iteration limit
    config = replace(run_config(agent.model_config_json, make_settings()), max_iterations=1)
    items = await run_all(llm(scripted_llm, llm_session), backends, agent, config)
    assert (items[-1].status, items[-1].iterations) == ("max_iterations", 1)


async def test_an_unexpected_error_still_ends_with_a_result(
    scripted_llm: ScriptedLLM, llm_session: aiohttp.ClientSession, backends: Backends
) -> None:
    items = await run_all(
        llm(scripted_llm, llm_session, BrokenLlm),
        backends,
        full_agent(),
        run_config(None, make_settings()),
    )
    failed, result = items[-2:]
    assert isinstance(failed, RunFailed)
    assert (failed.error.code, failed.error.message) == ("internal_error", "RuntimeError: boom")
    assert isinstance(result, RunResult)
    assert result.status == "failed"
    assert [m.role for m in result.new_messages] == ["user"]
