"""Built-ins: http_fetch against a real server on 127.0.0.1 (egress opened for loopback only
in this suite), HTML reduced to text; recall_knowledge dispatches to the conventions back-end."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response

from app.convert.html import html_to_page
from app.pipeline.sources.builtins import builtin_toolset
from app.security.egress import new_http_client
from app.tools.base import ToolResult
from app.tools.function import FunctionToolset
from tests.fixtures.live import serve_app
from tests.fixtures.pipeline import Recorders, ctx, make_backends, make_settings

PAGE = """<!doctype html><html><head><title> Release
 notes </title><style>body { color: red }</style><script>var secret = 1;</script></head>
<body><h1>Quiver 1.0</h1><p>Progressive   tools,
 fewer tokens.</p><ul><li>One</li><li>Two &amp; three</li></ul><noscript>enable js</noscript>
</body></html>"""


def _site() -> FastAPI:
    app = FastAPI()

    @app.get("/page")
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/data")
    async def data() -> JSONResponse:
        return JSONResponse({"items": [1, 2, 3]})

    @app.get("/missing")
    async def missing() -> Response:
        return Response("nothing here", status_code=404, media_type="text/plain")

    @app.get("/busy")
    async def busy() -> Response:
        return Response("try later", status_code=503, media_type="text/plain")

    @app.get("/image")
    async def image() -> Response:
        return Response(b"\x89PNG\r\n", media_type="image/png")

    @app.get("/long")
    async def long() -> Response:
        return Response("z" * 5000, media_type="text/plain")

    return app


@pytest.fixture(scope="module")
async def site() -> AsyncIterator[str]:
    async with serve_app(_site()) as url:
        yield url


@pytest.fixture
async def fetch_tools() -> AsyncIterator[tuple[FunctionToolset, Recorders]]:
    settings = make_settings(egress_allow_cidrs=["127.0.0.0/8"])
    rec = Recorders()
    async with new_http_client(settings) as http:
        yield builtin_toolset(make_backends(settings, http, rec)), rec


async def _fetch(tools: FunctionToolset, url: str, **extra: object) -> ToolResult:
    return await tools.call_tool("http_fetch", {"url": url, **extra}, ctx())


def test_html_to_page_keeps_title_drops_scripts() -> None:
    page = html_to_page(PAGE)
    assert page.title == "Release notes"
    assert page.text == "# Quiver 1.0\n\nProgressive tools, fewer tokens.\n\n- One\n- Two & three"


async def test_http_fetch_html(site: str, fetch_tools: tuple[FunctionToolset, Recorders]) -> None:
    result = await _fetch(fetch_tools[0], f"{site}/page")
    assert result.ok
    assert result.output == (
        f"URL: {site}/page\n\nTitle: Release notes\n\n"
        "# Quiver 1.0\n\nProgressive tools, fewer tokens.\n\n- One\n- Two & three"
    )


async def test_http_fetch_json_is_returned_as_text(
    site: str, fetch_tools: tuple[FunctionToolset, Recorders]
) -> None:
    result = await _fetch(fetch_tools[0], f"{site}/data")
    assert result.output == f'URL: {site}/data\n\n{{"items":[1,2,3]}}'


async def test_http_fetch_caps_characters(
    site: str, fetch_tools: tuple[FunctionToolset, Recorders]
) -> None:
    result = await _fetch(fetch_tools[0], f"{site}/long", max_chars=100)
    assert result.output == (
        f"URL: {site}/long\n\n{'z' * 100}\n…[truncated: showing 100/5000 characters]"
    )


async def test_http_fetch_errors(site: str, fetch_tools: tuple[FunctionToolset, Recorders]) -> None:
    missing = await _fetch(fetch_tools[0], f"{site}/missing")
    assert missing.error == f"HTTP 404 from {site}/missing: nothing here"
    assert not missing.retryable
    busy = await _fetch(fetch_tools[0], f"{site}/busy")
    assert busy.retryable
    image = await _fetch(fetch_tools[0], f"{site}/image")
    assert image.output == f"URL: {site}/image\n\n[binary content: image/png, 6 bytes not shown]"


async def test_http_fetch_goes_through_the_egress_guard(site: str) -> None:
    settings = make_settings()
    async with httpx.AsyncClient() as http:
        tools = builtin_toolset(make_backends(settings, http, Recorders()))
        result = await _fetch(tools, f"{site}/page")
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("Egress blocked: 127.0.0.1 (")


async def test_recall_knowledge_dispatches(
    fetch_tools: tuple[FunctionToolset, Recorders],
) -> None:
    tools, rec = fetch_tools
    args = {"query": "python", "directory": "src/api", "scope": "conventions"}
    result = await tools.call_tool("recall_knowledge", args, ctx())
    assert result.output == "- [src/api] use black"
    await tools.call_tool("recall_knowledge", {}, ctx())
    assert rec.conventions.calls == [
        {"query": "python", "limit": 5, "directory": "src/api", "scope": "conventions"},
        {"query": "", "limit": 5, "directory": None, "scope": None},
    ]
