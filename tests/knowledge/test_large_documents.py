"""Large documents and URLs against `quiver serve` on Postgres and SQLite: a 20 MB upload
answers 202 and ends `ready` while `/readyz` keeps answering in under a second; a broken one
ends `failed` with the reason; a page imported by URL (through the egress guard) is stored
with its URL as source and fetched again on refresh, keeping its id."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures.stores import STORES, ReadyWatch, admin, served_on
from tests.fixtures.threaded_server import ThreadedServer
from tests.knowledge.files import PLANTED, large_pdf

FACT = "The spare keys of the harbour office are in the red tin under the counter."
SITE: dict[str, tuple[bytes, str]] = {}
MAX_IMPORT = 32_000_000


async def _serve(request: Request) -> Response:
    body, media_type = SITE[request.path_params["name"]]
    return Response(body, media_type=media_type)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadedServer("documents-site")
    server.start(Starlette(routes=[Route("/{name:path}", _serve)]))
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


@pytest.fixture(scope="module", params=STORES)
async def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        served_on(
            request.param,
            tmp_path_factory.mktemp(f"large-{request.param}"),
            QUIVER_EGRESS_ALLOW_CIDRS="127.0.0.0/8",
            QUIVER_MAX_IMPORT_BYTES=str(MAX_IMPORT),
        ) as served,
        admin(served) as client,
    ):
        yield client


async def _base(live: httpx.AsyncClient, name: str) -> str:
    resp = await live.post("/api/v1/knowledge-bases", json={"name": name})
    assert resp.status_code == 201, resp.text
    return f"/api/v1/knowledge-bases/{resp.json()['id']}"


async def _settled(live: httpx.AsyncClient, url: str, timeout_s: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        doc: dict[str, Any] = (await live.get(url)).json()
        if doc["status"] != "pending" or time.monotonic() > deadline:
            return doc
        await asyncio.sleep(0.2)


@pytest.mark.timeout(600)
async def test_a_20_mb_upload_answers_202_and_never_stalls_the_process(
    live: httpx.AsyncClient,
) -> None:
    base = await _base(live, "large")
    raw = large_pdf(20_000_000, FACT)
    assert len(raw) > 19_000_000
    async with ReadyWatch(str(live.base_url)) as watch:
        resp = await live.post(
            f"{base}/documents", files={"file": ("office.pdf", raw, "application/pdf")}
        )
        assert resp.status_code == 202, resp.text
        pending = resp.json()
        assert (pending["status"], pending["chunk_count"]) == ("pending", 0)
        assert pending["size_bytes"] == len(raw)
        doc = await _settled(live, f"{base}/documents/{pending['id']}")
    print(f"worst /readyz during the 20 MB upload: {watch.worst_s:.3f} s ({watch.answers})")
    assert watch.answers > 0
    assert watch.worst_s < 1.0, f"/readyz took {watch.worst_s:.2f} s during the upload"
    assert (doc["status"], doc["error"]) == ("ready", None), doc
    assert doc["chunk_count"] > 0
    found = await live.get(f"{base}/search", params={"query": "where are the spare keys"})
    top = found.json()["results"][0]
    assert (top["document"], top["heading"]) == ("office.pdf", "Page 2")
    assert FACT in top["text"]


@pytest.mark.timeout(300)
async def test_a_broken_large_file_ends_failed_with_the_reason(live: httpx.AsyncClient) -> None:
    base = await _base(live, "broken")
    raw = b"%PDF-1.7\n" + bytes(range(256)) * 12_000  # 3 MB: above the 202 threshold
    resp = await live.post(f"{base}/documents", files={"file": ("bad.pdf", raw, "application/pdf")})
    assert resp.status_code == 202, resp.text
    doc = await _settled(live, f"{base}/documents/{resp.json()['id']}")
    assert doc["status"] == "failed"
    assert "cannot read it as pdf" in doc["error"]
    assert doc["chunk_count"] == 0
    listed = (await live.get(f"{base}/search", params={"query": "anything"})).json()
    assert listed["results"] == []
    too_big = await live.post(
        f"{base}/documents", files={"file": ("huge.txt", b"x" * (MAX_IMPORT + 1), "text/plain")}
    )
    assert too_big.status_code == 413, too_big.text
    assert "QUIVER_MAX_IMPORT_BYTES" in too_big.json()["detail"]


@pytest.mark.timeout(300)
async def test_a_url_is_imported_through_the_egress_guard_and_refreshed(
    live: httpx.AsyncClient, site: str
) -> None:
    base = await _base(live, "pages")
    SITE["notes/page.html"] = (
        b"<html><head><title>Harbour notice</title></head><body><h2>Ferries</h2>"
        b"<p>The winter ferry leaves at 07:10.</p></body></html>",
        "text/html; charset=utf-8",
    )
    handbook = next(p for p in PLANTED if p.filename == "handbook.pdf")
    SITE["files/handbook"] = (handbook.make(), "application/pdf")
    url = f"{site}/notes/page.html?edition=1"
    resp = await live.post(f"{base}/documents", json={"url": url})
    assert resp.status_code == 201, resp.text
    page = resp.json()
    assert (page["name"], page["source_url"], page["format"]) == (
        f"{site}/notes/page.html",
        url,
        "html",
    )
    pdf = await live.post(f"{base}/documents", json={"url": f"{site}/files/handbook", "name": "hb"})
    assert pdf.status_code == 201, pdf.text
    assert pdf.json()["format"] == "pdf"
    search = f"{base}/search"
    hit = (await live.get(search, params={"query": "winter ferry"})).json()["results"][0]
    assert hit["source"] == f"pages/{site}/notes/page.html > Harbour notice > Ferries"
    assert "07:10" in hit["text"]
    SITE["notes/page.html"] = (
        b"<html><body><h2>Ferries</h2><p>The winter ferry now leaves at 07:45.</p></body></html>",
        "text/html",
    )
    refreshed = await live.post(f"{base}/documents/{page['id']}/refresh")
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["id"] == page["id"]
    hit = (await live.get(search, params={"query": "winter ferry"})).json()["results"][0]
    assert "07:45" in hit["text"]
    not_fetched = await live.post(
        f"{base}/documents", json={"name": "typed.txt", "text": "typed by hand"}
    )
    cannot = await live.post(f"{base}/documents/{not_fetched.json()['id']}/refresh")
    assert cannot.status_code == 422, cannot.text
    missing = await live.post(f"{base}/documents", json={"url": f"{site}/nothing-here"})
    assert missing.status_code in (502, 422), missing.text
