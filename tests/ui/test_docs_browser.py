"""`/docs` in Chromium: Swagger UI renders the OpenAPI 3.1 document (every operation), offline,
under the console's security headers, without one Content-Security-Policy violation."""

from __future__ import annotations

import httpx
from playwright.async_api import Browser, ConsoleMessage, Request

OPERATIONS_AT_LEAST = 40


async def test_docs_render_every_operation_offline_under_a_strict_csp(
    console_url: str, chromium: Browser
) -> None:
    async with httpx.AsyncClient(base_url=console_url) as http:
        document = (await http.get("/openapi.json")).json()
        page_answer = await http.get("/docs")
    assert document["openapi"].startswith("3.1")
    operations = sum(
        1
        for path in document["paths"].values()
        for method in path
        if method in {"get", "post", "put", "patch", "delete"}
    )
    assert operations >= OPERATIONS_AT_LEAST
    assert page_answer.headers["x-frame-options"] == "DENY"
    csp = page_answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp

    context = await chromium.new_context()
    page = await context.new_page()
    problems: list[str] = []
    outside: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(message.text)

    def on_request(request: Request) -> None:
        if not request.url.startswith(console_url):
            outside.append(request.url)

    page.on("console", on_console)
    page.on("request", on_request)
    try:
        await page.goto(f"{console_url}/docs")
        await page.wait_for_selector(".opblock", timeout=30_000)
        rendered = await page.locator(".opblock").count()
        body = await page.inner_text("body")
        stamp = await page.locator(".version-stamp").first.inner_text()
    finally:
        await context.close()
    assert "Unable to render this definition" not in body
    assert rendered == operations, (rendered, operations)
    assert "3.1" in stamp
    assert not [p for p in problems if "Content Security Policy" in p], problems
    assert outside == []  # nothing loads from anywhere else
