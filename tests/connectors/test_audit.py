"""Audit rows per connector call, in real Postgres, with secrets redacted."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from app.config import Settings
from app.connectors.audit import AuditEntry, AuditSink
from app.connectors.execute import ConnectorExecutor
from app.connectors.models import Connector, ConnectorCall
from app.tools.base import CallContext
from tests.connectors.conftest import make_action, make_connector
from tests.connectors.server_app import LocalServer

TOKEN = "tok_audit_d0_not_l3ak"
PARAMS = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "password": {"type": "string"},
        "note": {"type": "string"},
        "code": {"type": "integer"},
    },
}


async def _persisted(sessionmaker: async_sessionmaker[AsyncSession], url: str) -> Connector:
    connector = make_connector(
        url, name="audited", auth_type="bearer", credentials={"token": TOKEN}
    )
    async with sessionmaker() as session:
        session.add(connector)
        await session.commit()
    return connector


async def _rows(sessionmaker: async_sessionmaker[AsyncSession], run_id: str) -> list[ConnectorCall]:
    async with sessionmaker() as session:
        result = await session.scalars(
            select(ConnectorCall)
            .where(ConnectorCall.run_id == run_id)
            .order_by(ConnectorCall.created_at)
        )
        return list(result)


async def test_each_call_writes_one_redacted_audit_row(
    sessionmaker: async_sessionmaker[AsyncSession],
    server: LocalServer,
    http: httpx.AsyncClient,
    local_settings: Settings,
) -> None:
    connector = await _persisted(sessionmaker, server.url)
    sink = AuditSink(sessionmaker)
    ex = ConnectorExecutor(http=http, settings=local_settings, audit=sink)
    ctx = CallContext(run_id="run-audit-1")
    ok = await ex.execute(
        connector,
        make_action("search", path="/search", parameters=PARAMS),
        {"q": "cats", "password": "pw-123456", "note": f"see {TOKEN}"},
        ctx,
    )
    failed = await ex.execute(
        connector, make_action("boom", path="/status/{code}", parameters=PARAMS), {"code": 503}, ctx
    )
    await ex.aclose()  # flushes the queue
    assert ok.ok
    assert not failed.ok
    first, second = await _rows(sessionmaker, "run-audit-1")
    assert (
        first.connector_id,
        first.connector_name,
        first.action,
        first.ok,
        first.status_code,
        first.error,
    ) == (connector.id, "audited", "search", True, 200, None)
    assert first.arguments == {"q": "cats", "password": "***", "note": "see ***"}
    assert first.latency_ms > 0
    assert (second.action, second.ok, second.status_code) == ("boom", False, 503)
    assert second.error is not None
    assert second.error.startswith("HTTP 503 Service Unavailable: ")
    for row in (first, second):
        columns = [column.name for column in ConnectorCall.__table__.columns]
        dumped = json.dumps({name: str(getattr(row, name)) for name in columns})
        assert TOKEN not in dumped
        assert "pw-123456" not in dumped
    assert sink.written == 2


async def test_record_only_queues_and_the_background_task_writes(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    sink = AuditSink(sessionmaker)
    entry = AuditEntry(
        connector_id=None,
        connector_name="c",
        action="a",
        arguments={},
        ok=True,
        status_code=200,
        error=None,
        latency_ms=1.0,
        run_id="run-bg",
    )
    for _ in range(3):
        sink.record(entry)
    assert sink.written == 0  # nothing awaited yet: the call path never waits for the database
    for _ in range(200):
        if sink.written == 3:
            break
        await asyncio.sleep(0.01)
    assert sink.written == 3
    await sink.aclose()
    assert len(await _rows(sessionmaker, "run-bg")) == 3


async def test_a_full_queue_drops_rows_instead_of_blocking(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    sink = AuditSink(sessionmaker, max_queue=2)
    entry = AuditEntry(
        connector_id=None,
        connector_name="c",
        action="a",
        arguments={},
        ok=True,
        status_code=200,
        error=None,
        latency_ms=1.0,
        run_id="run-full",
    )
    for _ in range(5):
        sink.record(entry)
    assert sink.dropped == 3
    await sink.aclose()
    assert sink.written == 2


async def test_audit_failures_never_reach_the_tool_result(
    tmp_path: Path,
    server: LocalServer,
    http: httpx.AsyncClient,
    local_settings: Settings,
) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'no_tables.db'}")
    sink = AuditSink(async_sessionmaker(engine))
    ex = ConnectorExecutor(http=http, settings=local_settings, audit=sink)
    result = await ex.execute(make_connector(server.url), make_action(), {}, CallContext())
    await ex.aclose()
    await engine.dispose()
    assert result.ok
    assert (sink.written, sink.dropped, sink.failed) == (0, 0, 1)


async def test_rows_of_a_connector_deleted_meanwhile_are_kept_without_the_link(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    sink = AuditSink(sessionmaker)
    gone = uuid.uuid4()
    sink.record(
        AuditEntry(
            connector_id=gone,
            connector_name="deleted_one",
            action="ping",
            arguments={},
            ok=True,
            status_code=200,
            error=None,
            latency_ms=1.0,
            run_id="run-audit-gone",
        )
    )
    await sink.aclose()
    (row,) = await _rows(sessionmaker, "run-audit-gone")
    assert row.connector_id is None
    assert row.connector_name == "deleted_one"
    assert sink.written == 1
    assert sink.failed == 0
