"""In a burst of run starts, a run's first model call waits until its first event is stored and
sent (`RunDeps.first_out`), at most `FIRST_OUT_WAIT_S` when the stream never starts."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from app.chat import loop
from app.chat.loop import ReactRun, RunDeps, RunInput, RunResult
from app.events import RunStarted
from app.llm.client import LlmClient
from app.pipeline.mode import run_config
from app.pipeline.sources.backends import Backends
from tests.fixtures.catalog import full_agent
from tests.fixtures.pipeline import make_settings
from tests.fixtures.scripted_llm import ScriptedLLM


def model_client(llm: ScriptedLLM) -> LlmClient:
    """A real client of the scripted OpenAI-compatible server (it records every request)."""
    return LlmClient(base_url=llm.base_url, api_key="k", model="m", timeout_s=5, max_retries=0)


def burst_run(client: LlmClient, backends: Backends, first_out: asyncio.Event) -> ReactRun:
    stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stored.set_result(None)
    deps = RunDeps(
        settings=make_settings(),
        backends=backends,
        llm=client,
        cancel=asyncio.Event(),
        stored=stored,
        stored_first=True,
        first_out=first_out,
    )
    inp = RunInput(run_id="run-1", conversation_id="conv-1", agent=full_agent(), message="hi")
    return ReactRun(deps=deps, inp=inp)


async def test_the_model_call_waits_until_the_first_event_is_sent(
    backends: Backends,
    pipeline_http: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop, "FIRST_OUT_WAIT_S", 30.0)  # the bound is the other test's
    first_out = asyncio.Event()
    async with model_client(scripted_llm) as client:
        events = burst_run(client, backends, first_out).events(run_config(None, make_settings()))
        assert isinstance(await anext(events), RunStarted)
        delta = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.5)  # without the hold, the request reaches the server in < 0.5 s
        assert scripted_llm.requests == []  # held while the first event is not sent
        first_out.set()
        await delta
        assert len(scripted_llm.requests) == 1
        items = [item async for item in events]
    assert isinstance(items[-1], RunResult)
    assert items[-1].status == "completed"


async def test_a_first_event_never_sent_holds_the_model_call_for_a_bounded_time(
    backends: Backends,
    pipeline_http: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop, "FIRST_OUT_WAIT_S", 0.1)
    started = time.perf_counter()
    async with model_client(scripted_llm) as client:
        run = burst_run(client, backends, asyncio.Event())
        items = [item async for item in run.events(run_config(None, make_settings()))]
    assert items[-1].status == "completed"
    assert len(scripted_llm.requests) == 1
    assert time.perf_counter() - started >= 0.1
