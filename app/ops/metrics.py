"""Prometheus metrics and the request-id / access-log middleware."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.routing import iter_route_contexts
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from starlette.types import Scope

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

    def render(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class _RouteLabels:
    """Full path templates (`/api/v1/agents/{id}`) for the `route` label.

    `scope["route"]` is the route as declared in its own router, so its path lacks the
    prefixes of the routers that include it; the app's effective routes carry the full path.
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.paths: dict[int, str] = {}
        """Keyed by `id(route)`: routes are unhashable and live as long as the app."""

    def label(self, route: object, scope: Scope) -> str:
        if route is None:
            # Answered before routing (the bearer pre-check): find the route it was meant for.
            path, method = scope.get("path", ""), scope.get("method", "")
            for ctx in iter_route_contexts(self.app.routes):
                regex, methods = getattr(ctx, "path_regex", None), getattr(ctx, "methods", None)
                if regex is not None and regex.match(path) and (not methods or method in methods):
                    return ctx.path_format or ctx.path or "unmatched"
            return "unmatched"
        if id(route) not in self.paths:
            self.paths = {
                id(ctx.original_route): ctx.path_format or ctx.path or ""
                for ctx in iter_route_contexts(self.app.routes)
            }
        return self.paths.get(id(route)) or str(getattr(route, "path", "unmatched"))


def install_http_middleware(app: FastAPI, metrics: Metrics) -> None:
    labels = _RouteLabels(app)

    @app.middleware("http")
    async def _observe(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        token = request_id_var.set(rid)
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            response.headers["x-request-id"] = rid
            return response
        finally:
            elapsed = time.perf_counter() - start
            route = labels.label(request.scope.get("route"), request.scope)
            metrics.requests.labels(request.method, route, str(status)).inc()
            metrics.latency.labels(request.method, route).observe(elapsed)
            logger.info(
                "request",
                extra={
                    "method": request.method,
                    "path": request.url.path,
                    "status": status,
                    "ms": round(elapsed * 1000, 2),
                },
            )
            request_id_var.reset(token)
