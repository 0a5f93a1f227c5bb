"""The outermost middleware: request id, metrics and access log, for plain and streamed bodies."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse, StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from app.ops.logging import request_id_var

PAUSE_S = 0.2


@pytest.fixture
async def probe_app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[FastAPI]:
    """The real app plus three probe routes outside /api (no key needed)."""
    app = create_app(settings, sessionmaker=sessionmaker)

    async def stream() -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            yield f"first {request_id_var.get()}\n".encode()
            await asyncio.sleep(PAUSE_S)
            yield f"last {request_id_var.get()}\n".encode()

        return StreamingResponse(body(), media_type="text/plain")

    async def own_id() -> JSONResponse:
        return JSONResponse({"ok": True}, headers={"X-Request-Id": "set-by-the-route"})

    async def boom() -> None:
        raise RuntimeError("probe failure")

    app.router.add_api_route("/probe/stream", stream, methods=["GET"])
    app.router.add_api_route("/probe/own-id", own_id, methods=["GET"])
    app.router.add_api_route("/probe/boom", boom, methods=["GET"])
    async with app.router.lifespan_context(app):
        yield app


def _client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://quiver.test")


def _sample(text: str, line_start: str) -> float:
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric line starting with {line_start!r}")


async def test_a_streamed_body_runs_in_the_request_id_context_and_is_timed_to_its_end(
    probe_app: FastAPI,
) -> None:
    async with _client(probe_app) as client:
        await client.get("/healthz")  # the first request pays for lazy set-up
        resp = await client.get("/probe/stream", headers={"X-Request-Id": "stream-1"})
        metrics = (await client.get("/metrics")).text
    assert resp.status_code == 200
    assert resp.headers["x-request-id"] == "stream-1"
    assert resp.text == "first stream-1\nlast stream-1\n"
    assert (
        _sample(
            metrics, 'quiver_http_requests_total{method="GET",route="/probe/stream",status="200"}'
        )
        == 1.0
    )
    # the latency covers the whole body, not only the time to the response headers
    assert (
        _sample(metrics, 'quiver_http_request_seconds_sum{method="GET",route="/probe/stream"}')
        >= PAUSE_S
    ), metrics


async def test_the_401_pre_check_answer_carries_a_request_id(probe_app: FastAPI) -> None:
    async with _client(probe_app) as client:
        resp = await client.get("/api/v1/agents", headers={"X-Request-Id": "no-key-1"})
        generated = await client.get("/api/v1/agents")
    assert resp.status_code == 401
    assert resp.headers["x-request-id"] == "no-key-1"
    assert re.fullmatch(r"[0-9a-f]{32}", generated.headers["x-request-id"])


async def test_the_request_id_header_is_never_doubled(probe_app: FastAPI) -> None:
    async with _client(probe_app) as client:
        resp = await client.get("/probe/own-id", headers={"X-Request-Id": "from-client"})
    assert resp.headers.get_list("x-request-id") == ["from-client"]


async def test_an_unhandled_error_counts_as_500_and_is_logged(
    probe_app: FastAPI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="quiver.access")
    async with _client(probe_app) as client:
        resp = await client.get("/probe/boom", headers={"X-Request-Id": "boom-1"})
        metrics = (await client.get("/metrics")).text
    assert resp.status_code == 500
    assert (
        _sample(
            metrics, 'quiver_http_requests_total{method="GET",route="/probe/boom",status="500"}'
        )
        == 1.0
    )
    access = [
        (r.__dict__["status"], r.__dict__["method"])
        for r in caplog.records
        if r.name == "quiver.access" and r.__dict__.get("path") == "/probe/boom"
    ]
    assert access == [(500, "GET")]
