"""Documents in every format (made with the usual libraries from real text, tests/knowledge/
files.py): converted in the workers, the planted fact found by `GET …/search` under its page,
slide, sheet or section; scanned PDFs refused with a clear message; `replace` keeps the id."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.convert.formats import detect_format
from tests.fixtures.crud import assert_error, create
from tests.knowledge.files import PLANTED, Planted, scanned_pdf

PATH = "/api/v1/knowledge-bases"


async def _base(client: httpx.AsyncClient, name: str = "harbour") -> dict[str, Any]:
    return await create(client, PATH, {"name": name, "description": "Harbour papers"})


async def _upload(
    client: httpx.AsyncClient, kb: dict[str, Any], name: str, raw: bytes, **data: str
) -> httpx.Response:
    files = {"file": (name, raw, "application/octet-stream")}
    return await client.post(f"{PATH}/{kb['id']}/documents", files=files, data=data)


@pytest.mark.parametrize("planted", PLANTED, ids=[p.filename for p in PLANTED])
async def test_each_format_is_converted_and_its_fact_found_where_it_was_put(
    client: httpx.AsyncClient, planted: Planted
) -> None:
    kb = await _base(client)
    raw = planted.make()
    resp = await _upload(client, kb, planted.filename, raw)
    assert resp.status_code == 201, resp.text
    doc = resp.json()
    assert doc["format"] == detect_format(planted.filename, None)
    assert (doc["status"], doc["error"], doc["size_bytes"]) == ("ready", None, len(raw))
    found = await client.get(f"{PATH}/{kb['id']}/search", params={"query": planted.question})
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert 0 < len(results) <= 5
    assert [r["rank"] for r in results] == list(range(1, len(results) + 1))
    hit = next(r for r in results if planted.answer in r["text"])
    assert hit["document"] == planted.filename
    assert hit["document_id"] == doc["id"]
    assert planted.heading in hit["heading"]
    where = f" > {hit['heading']}" if hit["heading"] else ""
    assert hit["source"] == f"harbour/{planted.filename}{where}"
    assert 0.0 < hit["score"] <= 1.0
    detail = (await client.get(f"{PATH}/{kb['id']}/documents/{doc['id']}")).json()
    text = detail["text"]
    assert text[hit["offset"] : hit["offset"] + len(hit["text"])] == hit["text"]


async def test_tables_become_markdown_tables(client: httpx.AsyncClient) -> None:
    kb = await _base(client)
    sheet = next(p for p in PLANTED if p.filename == "tides.xlsx")
    doc = (await _upload(client, kb, sheet.filename, sheet.make())).json()
    text = (await client.get(f"{PATH}/{kb['id']}/documents/{doc['id']}")).json()["text"]
    assert "# Sheet: Tides\n\n| Place | Tide | Height (m) |\n| --- | --- | --- |\n" in text
    assert "| North quay | spring | 5.8 |" in text


async def test_a_scanned_pdf_is_refused_with_a_clear_message(client: httpx.AsyncClient) -> None:
    kb = await _base(client)
    resp = await _upload(client, kb, "scan.pdf", scanned_pdf())
    assert_error(resp, 422, "Invalid", mentions=["no text layer", "scanned", "OCR"])
    assert (await client.get(f"{PATH}/{kb['id']}/documents")).json()["total"] == 0


async def test_replace_keeps_the_id_and_swaps_the_content(client: httpx.AsyncClient) -> None:
    kb = await _base(client)
    first = await _upload(client, kb, "notes.md", b"# Notes\n\nThe gate code is 1234.\n")
    assert first.status_code == 201, first.text
    again = await _upload(client, kb, "notes.md", b"# Notes\n\nThe gate code is 9876.\n")
    assert_error(again, 409, "Conflict", mentions=["replace"])
    replaced = await _upload(
        client, kb, "notes.md", b"# Notes\n\nThe gate code is 9876.\n", replace="true"
    )
    assert replaced.status_code == 201, replaced.text
    assert replaced.json()["id"] == first.json()["id"]
    json_replace = await client.post(
        f"{PATH}/{kb['id']}/documents",
        json={"name": "notes.md", "text": "# Notes\n\nGate code 5555.", "format": "markdown",
              "replace": True},
    )  # fmt: skip
    assert json_replace.status_code == 201, json_replace.text
    assert json_replace.json()["id"] == first.json()["id"]
    detail = (await client.get(f"{PATH}/{kb['id']}/documents/{first.json()['id']}")).json()
    assert [c["text"] for c in detail["chunks"]] == ["Gate code 5555."]
    found = (
        await client.get(f"{PATH}/{kb['id']}/search", params={"query": "gate code", "limit": 3})
    ).json()["results"]
    assert [r["text"] for r in found] == ["Gate code 5555."]
    assert (await client.get(f"{PATH}/{kb['id']}/documents")).json()["total"] == 1


async def test_search_route_errors(client: httpx.AsyncClient) -> None:
    kb = await _base(client)
    search = f"{PATH}/{kb['id']}/search"
    assert_error(await client.get(search), 422)
    assert_error(await client.get(search, params={"query": "  "}), 422, mentions=["query"])
    assert_error(await client.get(search, params={"query": "x", "limit": 99}), 422)
    empty = await client.get(search, params={"query": "anything"})
    assert empty.json() == {"query": "anything", "knowledge_base": "harbour", "results": []}
    missing = f"{PATH}/00000000-0000-0000-0000-000000000000/search"
    assert_error(await client.get(missing, params={"query": "x"}), 404, "NotFound")
