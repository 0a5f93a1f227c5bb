"""`/api/v1/knowledge-bases`: CRUD, documents as JSON or files (text, Markdown, HTML), chunk
positions, deletion, limits and links to agents."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.knowledge.models import KnowledgeChunk, KnowledgeDocument
from tests.fixtures.crud import assert_error, check_delete, check_pagination, create

PATH = "/api/v1/knowledge-bases"
DATA = Path(__file__).resolve().parents[1] / "data" / "knowledge"


def knowledge_base(name: str = "docs", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "Python reference pages", **extra}


def docs_of(kb: dict[str, Any]) -> str:
    return f"{PATH}/{kb['id']}/documents"


async def upload(
    client: httpx.AsyncClient, kb: dict[str, Any], filename: str, *, content_type: str
) -> dict[str, Any]:
    raw = (DATA / filename).read_bytes()
    files = {"file": (Path(filename).name, raw, content_type)}
    resp = await client.post(docs_of(kb), files=files)
    assert resp.status_code == 201, resp.text
    created: dict[str, Any] = resp.json()
    return created


async def chunk_count(session: AsyncSession, **where: Any) -> int:
    stmt = select(func.count(KnowledgeChunk.id)).filter_by(**where)
    return int(await session.scalar(stmt) or 0)


async def test_create_read_update_list(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, knowledge_base())
    assert created["document_count"] == 0
    assert (await client.get(f"{PATH}/{created['id']}")).json() == created
    patched = await client.patch(f"{PATH}/{created['id']}", json={"description": "new"})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["description"], patched.json()["name"]) == ("new", "docs")


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    await check_pagination(client, PATH, [knowledge_base(f"kb{i}") for i in range(3)])


async def test_markdown_body_is_chunked_by_headings_with_positions(
    client: httpx.AsyncClient,
) -> None:
    kb = await create(client, PATH, knowledge_base())
    text = (DATA / "python-dotenv-README.md").read_text()
    resp = await client.post(
        docs_of(kb), json={"name": "dotenv.md", "text": text, "format": "markdown"}
    )
    assert resp.status_code == 201, resp.text
    doc = resp.json()
    assert (doc["name"], doc["format"], doc["chars"]) == ("dotenv.md", "markdown", len(text))
    detail = (await client.get(f"{docs_of(kb)}/{doc['id']}")).json()
    chunks = detail["chunks"]
    assert len(chunks) == doc["chunk_count"] > 5
    assert [c["position"] for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:  # every chunk is found at its offset in the stored text
        assert (
            detail["text"][chunk["offset"] : chunk["offset"] + len(chunk["text"])]
            == (chunk["text"])
        )
        assert len(chunk["text"]) <= 1200
    headings = [c["heading"] for c in chunks]
    assert "python-dotenv > File format > Multiline values" in headings
    assert "python-dotenv > Other Use Cases > Disable load_dotenv" in headings
    # `# Development settings` inside a fenced code block is not a heading
    assert not any("Development settings" in h for h in headings)
    assert (await client.get(f"{PATH}/{kb['id']}")).json()["document_count"] == 1


async def test_file_uploads_of_text_markdown_and_html(client: httpx.AsyncClient) -> None:
    kb = await create(client, PATH, knowledge_base())
    txt = await upload(client, kb, "python-reference/try.txt", content_type="text/plain")
    md = await upload(client, kb, "python-dotenv-README.md", content_type="text/markdown")
    html = await upload(
        client, kb, "rustdoc-what-is-rustdoc.html", content_type="application/octet-stream"
    )
    assert [d["format"] for d in (txt, md, html)] == ["text", "markdown", "html"]
    assert txt["name"] == "try.txt"
    try_chunks = (await client.get(f"{docs_of(kb)}/{txt['id']}")).json()["chunks"]
    assert {c["heading"] for c in try_chunks} >= {
        'The "try" statement',
        'The "try" statement > "except" clause',
        'The "try" statement > "finally" clause',
    }
    page = (await client.get(f"{docs_of(kb)}/{html['id']}")).json()
    assert "<" not in page["text"].replace("<path>", "")  # tags are gone, text is kept
    assert "generate documentation for Rust projects" in page["text"]
    assert "What is rustdoc? > Using rustdoc with Cargo" in {c["heading"] for c in page["chunks"]}
    listed = (await client.get(docs_of(kb))).json()
    assert listed["total"] == 3
    assert {d["name"] for d in listed["items"]} == {"try.txt", "python-dotenv-README.md",
                                                     "rustdoc-what-is-rustdoc.html"}  # fmt: skip
    assert "text" not in listed["items"][0]


async def test_a_form_can_name_the_document_and_its_format(client: httpx.AsyncClient) -> None:
    kb = await create(client, PATH, knowledge_base())
    resp = await client.post(
        docs_of(kb),
        files={"file": ("notes", b"Title\n=====\n\nSome notes.\n", "application/octet-stream")},
        data={"name": "my notes", "format": "markdown"},
    )
    assert resp.status_code == 201, resp.text
    doc = resp.json()
    assert (doc["name"], doc["format"]) == ("my notes", "markdown")
    detail = (await client.get(f"{docs_of(kb)}/{doc['id']}")).json()
    assert [(c["heading"], c["text"]) for c in detail["chunks"]] == [("Title", "Some notes.")]


async def test_deleting_a_document_removes_its_chunks(
    client: httpx.AsyncClient, session: AsyncSession
) -> None:
    kb = await create(client, PATH, knowledge_base())
    keep = await upload(client, kb, "python-reference/with.txt", content_type="text/plain")
    gone = await upload(client, kb, "python-reference/try.txt", content_type="text/plain")
    assert await chunk_count(session, document_id=uuid.UUID(gone["id"])) == gone["chunk_count"]
    resp = await client.delete(f"{docs_of(kb)}/{gone['id']}")
    assert resp.status_code == 204, resp.text
    assert await chunk_count(session, document_id=uuid.UUID(gone["id"])) == 0
    assert await chunk_count(session, document_id=uuid.UUID(keep["id"])) == keep["chunk_count"]
    assert_error(await client.get(f"{docs_of(kb)}/{gone['id']}"), 404, "NotFound")
    assert_error(await client.delete(f"{docs_of(kb)}/{gone['id']}"), 404, "NotFound")
    assert (await client.get(f"{PATH}/{kb['id']}")).json()["document_count"] == 1


async def test_deleting_a_knowledge_base_removes_documents_and_chunks(
    client: httpx.AsyncClient, session: AsyncSession
) -> None:
    kb = await create(client, PATH, knowledge_base())
    await upload(client, kb, "python-reference/with.txt", content_type="text/plain")
    kb_id = uuid.UUID(kb["id"])
    assert await chunk_count(session, knowledge_base_id=kb_id) > 0
    await check_delete(client, PATH, kb["id"])
    assert await chunk_count(session, knowledge_base_id=kb_id) == 0
    docs = select(func.count(KnowledgeDocument.id)).filter_by(knowledge_base_id=kb_id)
    assert await session.scalar(docs) == 0
    assert_error(await client.get(docs_of(kb)), 404, "NotFound")


async def test_a_document_of_another_knowledge_base_is_not_found(
    client: httpx.AsyncClient,
) -> None:
    first = await create(client, PATH, knowledge_base("first"))
    second = await create(client, PATH, knowledge_base("second"))
    doc = await upload(client, first, "python-reference/with.txt", content_type="text/plain")
    assert_error(await client.get(f"{docs_of(second)}/{doc['id']}"), 404, "NotFound")
    assert_error(await client.delete(f"{docs_of(second)}/{doc['id']}"), 404, "NotFound")
    assert (await client.get(f"{docs_of(first)}/{doc['id']}")).status_code == 200


async def test_a_taken_document_name_is_409(client: httpx.AsyncClient) -> None:
    kb = await create(client, PATH, knowledge_base())
    body = {"name": "a.txt", "text": "first"}
    assert (await client.post(docs_of(kb), json=body)).status_code == 201
    assert_error(await client.post(docs_of(kb), json=body), 409, "Conflict", mentions=["a.txt"])


async def test_bad_documents_are_4xx_and_store_nothing(client: httpx.AsyncClient) -> None:
    kb = await create(client, PATH, knowledge_base())
    url = docs_of(kb)
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"files": {"file": ("x.txt", b"\xff\xfe\x00bin", "text/plain")}}, 422, "UTF-8"),
        ({"files": {"file": ("x.txt", b"text with a \x00 NUL", "text/plain")}}, 422, "NUL"),
        ({"files": {"file": ("x.pdf", b"%PDF-1.4", "application/pdf")}}, 422, "pdf"),
        ({"files": {"file": ("x.bin", b"\x01\x02", "application/x-thing")}}, 422, "format"),
        (
            {"files": {"file": ("x.txt", b"hi", "text/plain")}, "data": {"format": "pdf"}},
            422,
            "pdf",
        ),
        (
            {"files": {"file": ("x.txt", b"hi", "text/plain")}, "data": {"format": "doc"}},
            422,
            "format",
        ),
        (
            {"files": {"file": ("x.txt", b"hi", "text/plain")}, "data": {"replace": "yes"}},
            422,
            "replace",
        ),
        ({"data": {"name": "no file"}, "files": {"other": ("a", b"b")}}, 422, "other"),
        ({"json": {"name": "empty", "text": "  \n\n "}}, 422, "text"),
        ({"json": {"name": "", "text": "hello"}}, 422, "name"),
        ({"json": {"name": "x", "text": "hi", "format": "pdf"}}, 422, "format"),
        ({"json": {"name": "x", "text": "hi", "extra": 1}}, 422, "extra"),
        ({"json": ["not", "an", "object"]}, 422, "body"),
        ({"content": b"{not json", "headers": {"content-type": "application/json"}}, 422, "JSON"),
        ({"content": b"hello", "headers": {"content-type": "text/plain"}}, 422, "content type"),
    ]
    for kwargs, status, word in cases:
        resp = await client.post(url, **kwargs)
        assert_error(resp, status, mentions=[word])
    assert (await client.get(url)).json()["total"] == 0
    missing = f"{PATH}/{uuid.uuid4()}/documents"
    assert_error(await client.post(missing, json={"name": "a", "text": "b"}), 404, "NotFound")


async def test_agents_link_knowledge_bases(client: httpx.AsyncClient) -> None:
    kb = await create(client, PATH, knowledge_base())
    agent = await create(
        client, "/api/v1/agents", {"name": "reader", "knowledge_base_ids": [kb["id"]]}
    )
    assert agent["knowledge_base_ids"] == [kb["id"]]
    missing = str(uuid.uuid4())
    resp = await client.patch(
        f"/api/v1/agents/{agent['id']}", json={"knowledge_base_ids": [missing]}
    )
    assert_error(resp, 422, "Invalid", mentions=["knowledge_base_ids", missing])
    assert (await client.delete(f"{PATH}/{kb['id']}")).status_code == 204
    fetched = (await client.get(f"/api/v1/agents/{agent['id']}")).json()
    assert fetched["knowledge_base_ids"] == []


async def test_chat_keys_cannot_manage_knowledge_bases(
    client: httpx.AsyncClient, anon_client: httpx.AsyncClient
) -> None:
    resp = await client.post("/api/v1/api-keys", json={"name": "chat-only", "scopes": ["chat"]})
    assert resp.status_code == 201, resp.text
    token = resp.json()["key"]
    headers = {"Authorization": f"Bearer {token}"}
    assert_error(await anon_client.get(PATH, headers=headers), 403)
    assert_error(await anon_client.post(PATH, json=knowledge_base(), headers=headers), 403)
    assert_error(await anon_client.get(PATH), 401)
