"""Bad input never answers 5xx: bounded pagination, NUL characters, body size limit, bodies the
framework cannot parse, and RFC 3339 timestamps with `Z`. Each case runs on PostgreSQL and on
SQLite, which used to disagree (Postgres failed where SQLite stored or answered)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.migrate import upgrade
from app.main import create_app
from tests.conftest import ADMIN_TOKEN, SECRET_KEY
from tests.fixtures.crud import assert_error

LISTS = [
    "/api/v1/agents",
    "/api/v1/connectors",
    "/api/v1/databases",
    "/api/v1/mcp-servers",
    "/api/v1/skills",
    "/api/v1/conventions",
    "/api/v1/api-keys",
]
SMALL_LIMIT = 4096
IMPORT_LIMIT = SMALL_LIMIT * 4
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture(params=["postgres", "sqlite"])
async def store_app(
    request: pytest.FixtureRequest,
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    tmp_path: Path,
) -> AsyncIterator[FastAPI]:
    """The app on either store, with a small body limit (QUIVER_MAX_BODY_BYTES)."""
    if request.param == "postgres":
        pg = settings.model_copy(
            update={"max_body_bytes": SMALL_LIMIT, "max_import_bytes": IMPORT_LIMIT}
        )
        application = create_app(pg, sessionmaker=sessionmaker)
    else:
        lite = Settings(
            database_url=f"sqlite:///{tmp_path}/q.db",
            data_dir=tmp_path,
            admin_token=ADMIN_TOKEN,
            secret_keys=[SECRET_KEY],
            max_body_bytes=SMALL_LIMIT,
            max_import_bytes=IMPORT_LIMIT,
        )
        await asyncio.to_thread(upgrade, lite)
        application = create_app(lite)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def api(store_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=store_app),
        base_url="http://quiver.test",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ) as c:
        yield c


async def _count(api: httpx.AsyncClient, path: str) -> int:
    resp = await api.get(path)
    assert resp.status_code == 200, resp.text
    total: int = resp.json()["total"]
    return total


@pytest.mark.parametrize("offset", ["9223372036854775808", "99999999999999999999"])
async def test_huge_offset_is_a_422_on_every_list(api: httpx.AsyncClient, offset: str) -> None:
    for path in LISTS:
        resp = await api.get(path, params={"offset": offset})
        assert_error(resp, 422, "Invalid", mentions=["offset"])
    assert (await api.get(LISTS[0], params={"offset": 2147483647})).json()["items"] == []


async def test_nul_in_a_text_field_is_refused_and_nothing_is_written(
    api: httpx.AsyncClient,
) -> None:
    before = await _count(api, "/api/v1/skills")
    resp = await api.post(
        "/api/v1/skills", json={"name": "s1", "description": "a\u0000b", "content": "c"}
    )
    assert_error(resp, 422, "Invalid", mentions=["description", "NUL"])
    resp = await api.post("/api/v1/skills", json={"name": "s1", "content": {"x\u0000": 1}})
    assert_error(resp, 422, "Invalid", mentions=["content"])
    assert await _count(api, "/api/v1/skills") == before
    # an escaped backslash followed by "u0000" is ordinary text, stored as is
    ok = await api.post(
        "/api/v1/skills", json={"name": "s2", "description": "a\\u0000b", "content": "c"}
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["description"] == "a\\u0000b"


async def test_nul_in_json_objects_and_patches_is_refused(api: httpx.AsyncClient) -> None:
    agent = await api.post("/api/v1/agents", json={"name": "a1"})
    assert agent.status_code == 201, agent.text
    path = f"/api/v1/agents/{agent.json()['id']}"
    before = (await api.get(path)).json()
    resp = await api.patch(path, json={"model_config_json": {"tool_profile": "x\u0000"}})
    assert_error(resp, 422, "Invalid", mentions=["model_config_json.tool_profile"])
    resp = await api.patch(path, json={"instructions": "\u0000"})
    assert_error(resp, 422, "Invalid", mentions=["instructions"])
    assert (await api.get(path)).json() == before


async def test_nul_in_mcp_arguments_query_and_path_is_refused(api: httpx.AsyncClient) -> None:
    server = await api.post(
        "/api/v1/mcp-servers",
        json={"name": "m1", "transport": "streamable_http", "url": "https://mcp.example.com/mcp"},
    )
    assert server.status_code == 201, server.text
    call = await api.post(
        f"/api/v1/mcp-servers/{server.json()['id']}/call",
        json={"tool": "echo", "arguments": {"text": "hi\u0000"}},
    )
    assert_error(call, 422, "Invalid", mentions=["arguments.text"])
    agent = await api.post("/api/v1/agents", json={"name": "a2"})
    preview = await api.get(f"/api/v1/agents/{agent.json()['id']}/toolset?query=a%00b")
    assert_error(preview, 422, "Invalid", mentions=["query"])
    connector = await api.post(
        "/api/v1/connectors", json={"name": "c2", "base_url": "https://api.example.com"}
    )
    action = await api.get(f"/api/v1/connectors/{connector.json()['id']}/actions/x%00y")
    assert_error(action, 422, "Invalid", mentions=["path"])


async def test_body_over_the_limit_is_a_413_before_parsing(api: httpx.AsyncClient) -> None:
    before = await _count(api, "/api/v1/skills")
    big = {"name": "big", "content": "x" * SMALL_LIMIT}
    resp = await api.post("/api/v1/skills", json=big)
    assert_error(resp, 413, "PayloadTooLarge", mentions=["QUIVER_MAX_BODY_BYTES"])
    # not even parsed: invalid JSON above the limit is a 413 too, not a 422
    resp = await api.post(
        "/api/v1/skills",
        content=b"{" * (SMALL_LIMIT + 1),
        headers={"content-type": "application/json"},
    )
    assert_error(resp, 413, "PayloadTooLarge")
    assert await _count(api, "/api/v1/skills") == before
    under = await api.post("/api/v1/skills", json={"name": "small", "content": "x" * 1000})
    assert under.status_code == 201, under.text


async def test_document_imports_have_their_own_larger_limit(api: httpx.AsyncClient) -> None:
    body = "x" * (SMALL_LIMIT + 100)
    document = f"---\nname: large-import\ndescription: a long procedure\n---\n{body}"
    imported = await api.post("/api/v1/skills/import", json={"document": document})
    assert imported.status_code == 201, imported.text
    before = await _count(api, "/api/v1/skills")
    too_big = "y" * IMPORT_LIMIT
    document = f"---\nname: too-large\ndescription: too long\n---\n{too_big}"
    refused = await api.post("/api/v1/skills/import", json={"document": document})
    assert_error(refused, 413, "PayloadTooLarge", mentions=["QUIVER_MAX_IMPORT_BYTES"])
    assert await _count(api, "/api/v1/skills") == before


async def test_chunked_body_without_length_over_the_limit_is_a_413(
    api: httpx.AsyncClient,
) -> None:
    sent: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"name": "chunked", "content": "'
        for _ in range(64):
            sent.append(1)
            yield b"y" * 1024
        yield b'"}'

    resp = await api.post(
        "/api/v1/skills", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in resp.request.headers
    assert resp.request.headers["transfer-encoding"] == "chunked"
    assert_error(resp, 413, "PayloadTooLarge")
    assert sum(sent) < 64  # refused as soon as the limit was passed, not after the whole body

    async def small() -> AsyncIterator[bytes]:
        yield b'{"name": "chunked_ok", '
        yield b'"content": "fine"}'

    ok = await api.post(
        "/api/v1/skills", content=small(), headers={"content-type": "application/json"}
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["content"] == "fine"


@pytest.mark.parametrize(
    "body",
    [b'{"name": "\xff\xfe"}', b"[" * 2000 + b"]" * 2000],
    ids=["invalid-utf8-string", "deep-nesting"],
)
async def test_unparsable_body_is_a_422(api: httpx.AsyncClient, body: bytes) -> None:
    resp = await api.post(
        "/api/v1/skills", content=body, headers={"content-type": "application/json"}
    )
    assert_error(resp, 422, "Invalid", mentions=["body"])


async def test_timestamps_are_rfc3339_with_z(api: httpx.AsyncClient) -> None:
    created = await api.post("/api/v1/skills", json={"name": "ts", "content": "c"})
    assert created.status_code == 201, created.text
    item_id = created.json()["id"]
    read = (await api.get(f"/api/v1/skills/{item_id}")).json()
    listed = (await api.get("/api/v1/skills")).json()["items"]
    patched = (await api.patch(f"/api/v1/skills/{item_id}", json={"description": "d"})).json()
    for item in [created.json(), read, *listed, patched]:
        for field in ("created_at", "updated_at"):
            assert RFC3339_Z.match(item[field]), (field, item[field])
    assert read["created_at"] == created.json()["created_at"]
    keys = (await api.get("/api/v1/api-keys")).json()["items"]
    assert keys
    assert all(RFC3339_Z.match(k["created_at"]) for k in keys)


async def test_nul_in_uploads_and_forms_is_refused_on_every_upload_path(
    store_app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Multipart uploads (a knowledge document, the console's SKILL.md and OpenAPI files) and
    URL-encoded console forms with a NUL: 422 `{error, detail}`, nothing stored."""
    kb = await api.post("/api/v1/knowledge-bases", json={"name": "kb_nul"})
    assert kb.status_code == 201, kb.text
    documents = f"/api/v1/knowledge-bases/{kb.json()['id']}/documents"
    upload = await api.post(documents, files={"file": ("notes.md", b"# Notes\nabc\x00def\n")})
    assert_error(upload, 422, "Invalid", mentions=["NUL"])
    named = await api.post(
        documents, files={"file": ("notes.md", b"# Notes\n")}, data={"name": "a\x00b"}
    )
    assert_error(named, 422, "Invalid", mentions=["NUL"])
    assert (await api.get(documents)).json()["total"] == 0

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=store_app), base_url="http://quiver.test"
    ) as browser:
        login = await browser.get("/ui/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
        assert token is not None
        signed = await browser.post(
            "/ui/login", data={"api_key": ADMIN_TOKEN, "csrf_token": token.group(1)}
        )
        assert signed.status_code == 303, signed.text
        page = await browser.get("/ui/resources")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert csrf is not None
        skill = b"---\nname: nul-skill\ndescription: d\n---\nstep \x00 one\n"
        for path, name in (
            ("/ui/resources/skills/import", "SKILL.md"),
            ("/ui/resources/connectors/import", "openapi.yaml"),
        ):
            refused = await browser.post(
                path, data={"csrf_token": csrf.group(1)}, files={"file": (name, skill)}
            )
            assert_error(refused, 422, "Invalid", mentions=["NUL"])
        form = await browser.post(
            "/ui/resources/skills/import",
            content=f"csrf_token={csrf.group(1)}&document=a%00b".encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        assert_error(form, 422, "Invalid", mentions=["NUL"])
    assert await _count(api, "/api/v1/skills") == 0
    assert await _count(api, "/api/v1/connectors") == 0
