"""Issue 25 "a hostile page freezes the whole process": a page of unclosed tags fetched by a
chat's `http_fetch` and added as a knowledge document, with `/readyz` answering in under a
second throughout, on Postgres and SQLite (real uvicorn, scripted LLM, a real HTTP server on
127.0.0.1 serving the pages).

Quiver runs as its own `quiver serve` process, so the measure is its event loop alone.
Before the fix the standard library's HTML parser ran on the event loop and went quadratic:
the 60 KB page blocked `/readyz` for 51 s, the 1.8 MB one for minutes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.fixtures.live import of_kind, read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.stores import STORES, ReadyWatch, admin, served_on
from tests.fixtures.threaded_server import ThreadedServer

FACT = "The hostile page still says: the lighthouse keeper is named Ada Quill."
PAGES = {
    "60kb": f"<html><body><h1>Keeper</h1><p>{FACT}</p>" + "<a " * 20_000,
    "1800kb": f"<html><body><h1>Keeper</h1><p>{FACT}</p>" + "<a " * 600_000,
}


async def _page(request: Request) -> HTMLResponse:
    return HTMLResponse(PAGES[request.path_params["size"]])


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadedServer("hostile-site")
    server.start(Starlette(routes=[Route("/{size}", _page)]))
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


@pytest.fixture(scope="module", params=STORES)
async def live(
    request: pytest.FixtureRequest,
    scripted_llm_session: ScriptedLLM,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        served_on(
            request.param,
            tmp_path_factory.mktemp(f"hostile-{request.param}"),
            QUIVER_LLM_BASE_URL=scripted_llm_session.base_url,
            QUIVER_EGRESS_ALLOW_CIDRS="127.0.0.0/8",
        ) as served,
        admin(served) as client,
    ):
        await _warm_up(client, scripted_llm_session)
        yield client


async def _warm_up(live: httpx.AsyncClient, scripted_llm: ScriptedLLM) -> None:
    """One ordinary chat first: what a process does once (loading the tokenizer, starting
    the conversion workers) is not what is measured here."""
    agent = await live.post("/api/v1/agents", json={"name": "warm", "instructions": "Hi."})
    assert agent.status_code == 201, agent.text
    scripted_llm.reset()
    scripted_llm.script(Turn(text="hello"))
    body = {"agent_id": agent.json()["id"], "message": "hello"}
    async with live.stream("POST", "/api/v1/chat", json=body) as resp:
        await read_sse(resp)
    scripted_llm.reset()


@pytest.mark.timeout(300)
async def test_http_fetch_of_hostile_pages_never_stalls_the_process(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, site: str
) -> None:
    agent = await live.post("/api/v1/agents", json={"name": "reader", "instructions": "Read."})
    assert agent.status_code == 201, agent.text
    scripted_llm.script(
        Turn(tool_calls=[("small", "http_fetch", {"url": f"{site}/60kb"})]),
        Turn(tool_calls=[("large", "http_fetch", {"url": f"{site}/1800kb"})]),
        Turn(text="Ada Quill."),
    )
    body = {"agent_id": agent.json()["id"], "message": "Who keeps the lighthouse?"}
    async with (
        ReadyWatch(str(live.base_url)) as watch,
        live.stream("POST", "/api/v1/chat", json=body) as resp,
    ):
        assert resp.status_code == 200
        events = await read_sse(resp)
    results = {r["call_id"]: r for r in of_kind(events, "tool_result")}
    for call in ("small", "large"):
        assert results[call]["ok"], results[call]
        assert FACT in results[call]["output"]
    assert of_kind(events, "run_finished")[0]["status"] == "completed"
    print(f"worst /readyz during the fetches: {watch.worst_s:.3f} s ({watch.answers} answers)")
    assert watch.answers > 0
    assert watch.worst_s < 1.0, f"/readyz took {watch.worst_s:.2f} s during the fetches"


@pytest.mark.timeout(300)
async def test_hostile_pages_as_knowledge_documents_never_stall_the_process(
    live: httpx.AsyncClient,
) -> None:
    kb = await live.post("/api/v1/knowledge-bases", json={"name": "pages"})
    assert kb.status_code == 201, kb.text
    documents = f"/api/v1/knowledge-bases/{kb.json()['id']}/documents"
    async with ReadyWatch(str(live.base_url)) as watch:
        for size, page in PAGES.items():
            files = {"file": (f"{size}.html", page.encode(), "text/html")}
            resp = await live.post(documents, files=files)
            assert resp.status_code == 201, resp.text
            assert resp.json()["status"] == "ready"
        found = await live.get(
            f"/api/v1/knowledge-bases/{kb.json()['id']}/search",
            params={"query": "who is the lighthouse keeper"},
        )
    assert found.status_code == 200, found.text
    assert FACT in found.json()["results"][0]["text"]
    print(f"worst /readyz during the uploads: {watch.worst_s:.3f} s ({watch.answers} answers)")
    assert watch.answers > 0
    assert watch.worst_s < 1.0, f"/readyz took {watch.worst_s:.2f} s during the uploads"
