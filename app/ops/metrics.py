"""Prometheus metrics and the request-id / access-log middleware."""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict

from fastapi import FastAPI, Response
from fastapi.routing import iter_route_contexts
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.ops.logging import request_id_var

logger = logging.getLogger("quiver.access")


class Metrics:
    """One registry per app so tests can build many apps in one process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "quiver_http_requests_total",
            "HTTP requests",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "quiver_http_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=self.registry,
        )
        self.runs = Counter(
            "quiver_runs_total", "Chat runs by final status", ["status"], registry=self.registry
        )
        self.tool_calls = Counter(
            "quiver_tool_calls_total",
            "Tool calls by kind and outcome",
            ["kind", "ok"],
            registry=self.registry,
        )
        self.index_builds = Gauge(
            "quiver_tool_index_builds",
            "Tool rankers being built in the background, or a warm-up due",
            registry=self.registry,
        )
        """Set by the runtime (app/pipeline/warm.py, index_builds.py): 0 once start-up's
        and the last change's warm-ups are done."""
        # process_cpu_seconds_total, process_resident_memory_bytes, open fds (docs/operations.md)
        ProcessCollector(registry=self.registry)

    def render(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


_UNROUTED = 256


class _RouteLabels:
    """Full path templates (`/api/v1/agents/{id}`) for the `route` label.

    `scope["route"]` is the route as declared in its own router, so its path lacks the
    prefixes of the routers that include it; the app's effective routes carry the full path.
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.paths: dict[int, str] = {}
        """Keyed by `id(route)`: routes are unhashable and live as long as the app."""
        self.unrouted: OrderedDict[tuple[str, str], str] = OrderedDict()
        """(method, path) → label of requests without a route, the latest `_UNROUTED` ones."""

    def label(self, route: object, scope: Scope) -> str:
        if route is None:
            # Answered before routing (the bearer pre-check), or by a mounted app (`/mcp`):
            # find the route it was meant for, once per path while it stays in use.
            key = (scope.get("method", ""), scope.get("path", ""))
            found = self.unrouted.get(key)
            if found is None:
                found = self._route_of(*key)
                self.unrouted[key] = found
                if len(self.unrouted) > _UNROUTED:
                    self.unrouted.popitem(last=False)
            return found
        if id(route) not in self.paths:
            self.paths = {
                id(ctx.original_route): ctx.path_format or ctx.path or ""
                for ctx in iter_route_contexts(self.app.routes)
            }
        return self.paths.get(id(route)) or str(getattr(route, "path", "unmatched"))

    def _route_of(self, method: str, path: str) -> str:
        for ctx in iter_route_contexts(self.app.routes):
            regex, methods = getattr(ctx, "path_regex", None), getattr(ctx, "methods", None)
            if regex is not None and regex.match(path) and (not methods or method in methods):
                return ctx.path_format or ctx.path or "unmatched"
        return "unmatched"


class ObserveRequests:
    """Pure ASGI, outermost: request id, metrics and the access log for every HTTP response.

    The request id is the client's `X-Request-Id` or a new uuid4 hex; it is set in the logging
    context for the whole request (streamed bodies included) and echoed in the response's
    `X-Request-Id`. Each response counts in `quiver_http_requests_total{method, route, status}`;
    `quiver_http_request_seconds` and the access log's `ms` run to the last byte of the body
    (for an SSE stream: until it ends). An exception that escapes the app counts as 500.

    Pure ASGI rather than `@app.middleware("http")`: that one relays every body chunk (each
    SSE frame) through an extra task and memory stream.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics, labels: _RouteLabels) -> None:
        self.app = app
        self.metrics = metrics
        self.labels = labels

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _header(scope, b"x-request-id") or uuid.uuid4().hex
        rid_header = (b"x-request-id", rid.encode("latin-1"))
        token = request_id_var.set(rid)
        start = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [h for h in message.get("headers", ()) if h[0].lower() != rid_header[0]]
                headers.append(rid_header)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            method = scope.get("method", "")
            route = self.labels.label(scope.get("route"), scope)
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(elapsed)
            if logger.isEnabledFor(logging.INFO):
                logger.info(
                    "request",
                    extra={
                        "method": method,
                        "path": scope.get("path", ""),
                        "status": status,
                        "ms": round(elapsed * 1000, 2),
                    },
                )
            request_id_var.reset(token)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1")) or None
    return None


def install_http_middleware(app: FastAPI, metrics: Metrics) -> None:
    """Add `ObserveRequests`; call it after every other middleware so it is the outermost."""
    app.add_middleware(ObserveRequests, metrics=metrics, labels=_RouteLabels(app))
