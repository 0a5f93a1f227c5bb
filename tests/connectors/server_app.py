"""A small real HTTP server for connector and egress tests (uvicorn in a daemon thread).

Routes: `/items?n=` (a JSON list), `/big?size=` (bytes), `/slow?delay=`, `/trickle`,
`/status/{code}`, `/redirect?to=&code=`, and a catch-all that echoes what it received
(method, path, query, headers, JSON body) and logs it in `LocalServer.log`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from tests.fixtures.threaded_server import ThreadedServer


async def _echo(request: Request) -> Response:
    raw = await request.body()
    body: Any
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")
    record = {
        "method": request.method,
        "path": request.url.path,
        "raw_path": request.scope["raw_path"].decode(),
        "raw_query": request.scope["query_string"].decode(),
        "query": [[k, v] for k, v in request.query_params.multi_items()],
        "headers": {k.lower(): v for k, v in request.headers.items()},
        "body": body,
    }
    request.app.state.log.append(record)
    return JSONResponse(record)


async def _items(request: Request) -> Response:
    n = int(request.query_params.get("n", "25"))
    return JSONResponse([{"id": i, "name": f"item-{i}", "status": "ok"} for i in range(n)])


async def _big(request: Request) -> Response:
    size = int(request.query_params.get("size", "100000"))

    async def chunks() -> AsyncIterator[bytes]:
        sent = 0
        while sent < size:
            part = min(16384, size - sent)
            yield b"x" * part
            sent += part

    return StreamingResponse(chunks(), media_type="text/plain")


async def _slow(request: Request) -> Response:
    await asyncio.sleep(float(request.query_params.get("delay", "1")))
    return PlainTextResponse("finally")


async def _trickle(request: Request) -> Response:
    count = int(request.query_params.get("chunks", "20"))
    interval = float(request.query_params.get("interval", "0.1"))

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(count):
            yield b"."
            await asyncio.sleep(interval)

    return StreamingResponse(chunks(), media_type="text/plain")


async def _status(request: Request) -> Response:
    code = int(request.path_params["code"])
    headers = {"Retry-After": "7"} if code == 429 else {}
    return JSONResponse(
        {"error": f"status {code}", "detail": "as requested"}, code, headers=headers
    )


async def _redirect(request: Request) -> Response:
    return RedirectResponse(
        request.query_params["to"], status_code=int(request.query_params.get("code", "302"))
    )


async def _loop(request: Request) -> Response:
    return RedirectResponse("/loop", status_code=302)


def make_app(log: list[dict[str, Any]] | None = None) -> Starlette:
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    app = Starlette(
        routes=[
            Route("/items", _items),
            Route("/big", _big),
            Route("/slow", _slow),
            Route("/trickle", _trickle),
            Route("/status/{code:int}", _status, methods=methods),
            Route("/redirect", _redirect, methods=methods),
            Route("/loop", _loop),
            Route("/{rest:path}", _echo, methods=methods),
        ]
    )
    app.state.log = log if log is not None else []
    return app


class LocalServer:
    """`make_app()` under uvicorn on `host` (any 127.0.0.0/8 address), port chosen by the OS."""

    def __init__(self, host: str = "127.0.0.1", *, tls: tuple[str, str] | None = None) -> None:
        self.host = host
        self.tls = tls
        """(certfile, keyfile) to serve HTTPS."""
        self._http = ThreadedServer(f"connector-test-{host}")
        self.log: list[dict[str, Any]] = []
        """Every request the echo route received, exactly as the server saw it."""

    @property
    def last(self) -> dict[str, Any]:
        return self.log[-1]

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def start(self) -> LocalServer:
        self._http.start(
            make_app(self.log),
            host=self.host,
            ssl_certfile=self.tls[0] if self.tls else None,
            ssl_keyfile=self.tls[1] if self.tls else None,
        )
        return self

    def stop(self) -> None:
        self._http.stop()
