"""Long-lived runtime objects owned by the app lifespan (HTTP client, pools, executors)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.cache import AgentCache
from app.apikeys.cache import ApiKeyCache
from app.approvals.notify import ApprovalNotifier
from app.audit.history import ToolHistory
from app.audit.sink import ToolCallSink
from app.chat.delegation import Delegator
from app.chat.hub import RunHub
from app.chat.pgwrite import asyncpg_dsn
from app.chat.retention import RetentionSweeper
from app.chat.runner import RunManager
from app.config import Settings
from app.connectors.audit import AuditSink
from app.connectors.execute import ConnectorExecutor
from app.conventions.backend import ConventionRecall
from app.convert.pool import ConversionPool
from app.databases.engines import EngineCache
from app.databases.query import DatabaseExecutor
from app.db.pgconn import PgTarget
from app.db.row_cache import RowCache
from app.knowledge.backend import KnowledgeSearch
from app.knowledge.ingest import KnowledgeIngest
from app.llm.client import LlmClient
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.mcp.repository import McpServerRepository
from app.ops.metrics import Metrics
from app.pipeline import index_builds
from app.pipeline.couse import CoUsePriors
from app.pipeline.sources.backends import Backends
from app.pipeline.warm import IndexWarmer
from app.security.egress import new_http_client
from app.security.throttle import FailedAuthThrottle
from app.skills.backend import SkillFiles


@dataclass(kw_only=True)
class Runtime:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient
    audit: AuditSink
    tool_audit: ToolCallSink
    connectors: ConnectorExecutor
    engines: EngineCache
    databases: DatabaseExecutor
    mcp: McpPool
    backends: Backends
    hub: RunHub
    runs: RunManager
    agents: AgentCache
    keys: ApiKeyCache
    mcp_servers: RowCache[McpServer]
    """MCP server rows for the admin test call (`POST /mcp-servers/{id}/call`)."""
    converter: ConversionPool
    """Worker processes for HTML and documents (`http_fetch`, knowledge uploads)."""
    knowledge: KnowledgeSearch
    ingest: KnowledgeIngest
    warming: asyncio.Task[None] | None = None
    """The conversion workers starting in the background."""
    auth_throttle: FailedAuthThrottle
    retention: RetentionSweeper
    notifier: ApprovalNotifier | None = None
    """Sends new approvals to `QUIVER_APPROVAL_WEBHOOK_URL` (None: not configured)."""
    warmer: IndexWarmer | None = None
    """Builds tool rankers when sources change (None when the store is a test's)."""

    @classmethod
    async def start(
        cls,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        metrics: Metrics,
        *,
        background: async_sessionmaker[AsyncSession] | None = None,
    ) -> Runtime:
        """`background`: sessions for the worker heartbeat, when `sessionmaker` is bound to
        one connection (tests): the heartbeat must not share it with requests."""
        # Pinned connects for tool traffic (egress-checked); the LLM has a pool of its own.
        http = new_http_client(settings, strict=False)
        # Writes of the run path on connections of their own, when the app owns its store
        # (a test's sessionmaker bound to one rolled-back transaction keeps them in it).
        owned_postgres = background is None and not settings.is_sqlite
        fast_dsn = (
            PgTarget.of(asyncpg_dsn(settings.async_database_url), pooled=settings.behind_pooler)
            if owned_postgres
            else None
        )
        audit = AuditSink(sessionmaker)
        tool_audit = ToolCallSink(sessionmaker, dsn=fast_dsn)
        connectors = ConnectorExecutor(http=http, settings=settings, audit=audit)
        engines = EngineCache()
        databases = DatabaseExecutor(engines)
        mcp = McpPool(settings)
        delegator = Delegator()
        converter = ConversionPool(
            workers=settings.convert_workers,
            timeout_s=settings.convert_timeout_s,
            memory_bytes=settings.convert_memory_mb * 1024 * 1024,
        )
        warming = asyncio.create_task(converter.warm())
        knowledge = KnowledgeSearch(sessionmaker)
        backends = Backends(
            settings=settings,
            http=http,
            connectors=connectors,
            databases=databases,
            mcp=mcp,
            conventions=ConventionRecall(sessionmaker),
            tool_audit=tool_audit,
            knowledge=knowledge,
            delegation=delegator,
            converter=converter,
            skills=SkillFiles(sessionmaker),
            couse=CoUsePriors(ToolHistory(sessionmaker)),
        )
        hub = RunHub(notify=not settings.is_sqlite)
        await hub.start(settings)
        agents = AgentCache(sessionmaker)
        notifier = ApprovalNotifier.from_settings(settings, http)
        runs = RunManager(
            settings=settings,
            sessionmaker=sessionmaker,
            hub=hub,
            backends=backends,
            # The model endpoint is trusted configuration: its own pool (see `LlmClient`).
            llm=LlmClient.from_settings(settings) if settings.llm_configured else None,
            on_finished=lambda status: metrics.runs.labels(status).inc(),
            background=background,
            agents=agents,
            fast_dsn=fast_dsn,
            notify_approval=notifier.notify if notifier is not None else None,
        )
        delegator.bind(runs)
        await runs.open()
        runtime = cls(
            settings=settings,
            sessionmaker=sessionmaker,
            http=http,
            audit=audit,
            tool_audit=tool_audit,
            connectors=connectors,
            engines=engines,
            databases=databases,
            mcp=mcp,
            backends=backends,
            hub=hub,
            runs=runs,
            agents=agents,
            keys=ApiKeyCache(),
            mcp_servers=RowCache(McpServer, sessionmaker),
            converter=converter,
            knowledge=knowledge,
            ingest=KnowledgeIngest(
                settings=settings, sessionmaker=sessionmaker, converter=converter, http=http
            ),
            warming=warming,
            auth_throttle=FailedAuthThrottle(
                limit=settings.auth_fail_limit, window_s=settings.auth_fail_window_s
            ),
            retention=RetentionSweeper(background or sessionmaker, settings.history_retention_days),
            notifier=notifier,
        )
        runtime.retention.start()
        mcp.on_tools_changed = runtime.store_mcp_tools
        if background is None and settings.tool_selection_prewarm:
            runtime.warmer = IndexWarmer(sessionmaker, agents, settings, backends)
            runtime.warmer.start()
        metrics.index_builds.set_function(
            lambda: index_builds.pending() + bool(runtime.warmer and runtime.warmer.busy)
        )
        return runtime

    async def store_mcp_tools(self, server_id: uuid.UUID, tools: list[dict[str, Any]]) -> None:
        """Persist a refreshed MCP tool list (list_changed notification or TTL refresh)."""
        async with self.sessionmaker() as session:
            await McpServerRepository(session).store_tools(server_id, tools)
            await session.commit()

    async def aclose(self) -> None:
        if self.warming is not None:
            self.warming.cancel()
            with contextlib.suppress(BaseException):
                await self.warming
        if self.warmer is not None:
            await self.warmer.aclose()
        for closer in (
            self.ingest.aclose,
            self.retention.aclose,
            self.runs.aclose,
            self.mcp.aclose,
            self.connectors.aclose,
            self.audit.aclose,
            self.tool_audit.aclose,
            self.engines.aclose,
            self.hub.aclose,
            *([self.notifier.aclose] if self.notifier is not None else []),
            self.http.aclose,
            self.converter.aclose,
            *([self.runs.llm.aclose] if self.runs.llm is not None else []),
        ):
            with contextlib.suppress(Exception):
                await closer()
