"""Application factory: `create_app(settings)` wires storage, runtime back-ends and routers."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from types import FrameType

from fastapi import FastAPI, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.routing import NoMatchFound

from app.api import API_PREFIX, include_api_routers
from app.apikeys.service import api_key_service
from app.chat.fast_route import ChatFastPath
from app.chat.router import CHAT_PATH, chat_route
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.errors import OPENAI_PREFIX, add_error_handlers, error_body
from app.kit.openapi import install_docs
from app.kit.request_guard import RequestGuard
from app.kit.tokens import count_tokens
from app.mcpserver.endpoint import McpEndpoint
from app.ops import tracing
from app.ops.metrics import Metrics, install_http_middleware
from app.runtime import Runtime
from app.security.auth import BearerPrecheck
from app.security.crypto import configure_from_settings
from app.ui.api_auth import console_api_key, console_precheck
from app.ui.mount import install_console

logger = logging.getLogger("quiver")


async def seed_admin_key(app: FastAPI, settings: Settings) -> None:
    token = settings.admin_token.get_secret_value() if settings.admin_token else None
    async with app.state.sessionmaker() as session:
        created = await api_key_service.seed_admin(session, token)
        await session.commit()
    if created:
        sys.stdout.write(
            "\nNo QUIVER_ADMIN_TOKEN configured: created an admin API key (shown once):\n"
            f"    {created}\n\n"
        )
        sys.stdout.flush()


def app_from_env() -> FastAPI:
    """`create_app` with the environment's settings: what each `quiver serve --workers N`
    process builds (uvicorn imports it by name in every worker)."""
    from app.config import load_settings
    from app.ops.logging import configure_logging

    settings = load_settings()
    configure_logging(settings.log_level)
    return create_app(settings, freeze_gc=True, drain=True)


def _drain_on_sigterm(runtime: Runtime) -> None:
    """Chain a drain before the server's own SIGTERM handler (uvicorn's, installed before the
    app starts): the process stops starting runs at once, then shuts down gracefully."""
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        runtime.runs.drain()
        if callable(previous):
            previous(signum, frame)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_sigterm)


def _build_routes(app: FastAPI) -> None:
    """Analyse every route's dependencies now. FastAPI builds them lazily on the first request
    (~0.1-0.3 s of CPU on the event loop for our ~200 routes), which would stall the first
    requests after a (rolling) restart; looking up a name that no route has walks them all."""
    with suppress(NoMatchFound):
        app.url_path_for("quiver:warm-up")


def _freeze_gc() -> None:
    gc.collect()
    gc.freeze()


def create_app(
    settings: Settings,
    *,
    sessionmaker: async_sessionmaker[AsyncSession] | None = None,
    freeze_gc: bool = False,
    drain: bool = False,
) -> FastAPI:
    """Build the app. Tests may pass a `sessionmaker` bound to a transaction they roll back.

    `freeze_gc` (`quiver serve`): once started, move every object alive then (modules, the
    runtime: ~240k objects) out of the cyclic collector's reach (`gc.freeze`). A full
    collection walked them all, ~90 ms with the event loop stopped, and a burst of requests
    triggers one (docs/benchmarks.md, "Side by side"). They live as long as the process anyway.

    The start-up warm-up (`IndexWarmer`) loads the recent agents' tools and rankers after
    that (~2,000 legacy tools: a few hundred thousand objects); they are frozen too once it is
    done, before `/readyz` reports ready: unfrozen, every full collection walked them again,
    ~140 ms every few chats of such an agent (docs/benchmarks.md, "Large catalogs, cold").

    `drain` (`quiver serve`): SIGTERM first drains the process (`RunManager.drain`: readiness
    turns false, no new run starts), then lets uvicorn shut down as usual (docs/operations.md).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_from_settings(settings)
        tracing.configure(settings)
        engine = create_engine(settings)
        app.state.engine = engine
        app.state.sessionmaker = sessionmaker or create_sessionmaker(engine)
        runtime = await Runtime.start(
            settings,
            app.state.sessionmaker,
            app.state.metrics,
            background=create_sessionmaker(engine) if sessionmaker is not None else None,
        )
        app.state.runtime = runtime
        try:
            await seed_admin_key(app, settings)
            await asyncio.to_thread(count_tokens, "warm up")  # loads o200k_base (~0.7 s) now
            _build_routes(app)
            if freeze_gc:
                gc.collect()
                gc.freeze()
                if runtime.warmer is not None:  # and again once its warm-up has loaded
                    runtime.warmer.after_start_up = _freeze_gc
            if drain:
                _drain_on_sigterm(runtime)
            async with mcp_endpoint.running(runtime):
                yield
        finally:
            await runtime.aclose()
            await engine.dispose()
            tracing.shutdown()

    app = FastAPI(
        title="Quiver",
        version="0.1.0",
        description="Progressive-disclosure tool gateway for LLM agents.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        telemetry={"exclude": tracing.untraced_path},  # request spans when tracing is on
    )
    app.state.settings = settings
    metrics = Metrics()
    app.state.metrics = metrics
    add_error_handlers(app)
    # Innermost: POST /api/v1/chat answered without routing when it can (app/chat/fast_route.py).
    app.add_middleware(ChatFastPath, path=API_PREFIX + CHAT_PATH, route=chat_route())
    app.add_middleware(
        BearerPrecheck, prefixes=("/api/", OPENAI_PREFIX), also_allow=console_precheck
    )
    app.state.chat_key_fallback = console_api_key
    app.add_middleware(
        RequestGuard,
        max_body_bytes=settings.max_body_bytes,
        max_import_bytes=settings.max_import_bytes,
    )
    install_http_middleware(app, metrics)  # outermost: counts and logs every response
    mcp_endpoint = McpEndpoint(app)
    # MCP streamable HTTP; not part of the OpenAPI schema. First among the routes: a call is
    # routed at once instead of after every API route has been tried.
    app.mount("/mcp", mcp_endpoint)
    include_api_routers(app)
    install_docs(app)
    install_console(app)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], response_model=None, responses={503: {}})
    async def readyz() -> Response | dict[str, str]:
        """Readiness: storage answers, the process is not draining, and its start-up warm-up
        has the recent agents' tool sets in memory (`IndexWarmer.ready`, at most 30 s)."""
        from fastapi.responses import JSONResponse

        runtime = getattr(app.state, "runtime", None)
        if runtime is not None and runtime.runs.draining_since is not None:
            return JSONResponse(error_body("Unavailable", "draining: shutting down"), 503)
        if runtime is not None and runtime.warmer is not None and not runtime.warmer.ready():
            message = "warming up: loading the recent agents' tools"
            return JSONResponse(error_body("Unavailable", message), 503)
        try:
            async with app.state.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:  # readiness must answer, whatever broke
            logger.warning("readiness check failed: %s", type(exc).__name__)
            return JSONResponse(error_body("Unavailable", "storage is not reachable"), 503)
        return {"status": "ready"}

    @app.get("/metrics", tags=["ops"], include_in_schema=False)
    async def prometheus_metrics() -> Response:
        return metrics.render()

    return app
