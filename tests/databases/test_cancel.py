"""A cancelled query (its run was cancelled) stops on the server, and the pool stays healthy."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from app.databases.query import DatabaseExecutor
from app.tools.base import CallContext
from tests.databases.activity import SLOW_SQL, running
from tests.databases.conftest import DIALECTS, make_connector
from tests.databases.seed import SeededDb

CTX = CallContext(run_id="test-cancel")


async def wait_for_state(db: SeededDb, *, busy: bool, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while await running(db) != busy:
        assert time.monotonic() < deadline, f"the query never became {'busy' if busy else 'idle'}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_cancelled_query_stops_on_the_server(
    dialect: str, db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    db = seeded[dialect]
    # Its own engine (a new id), so the pool state checked below is this test's.
    conn = make_connector(db, id=uuid.uuid4(), query_timeout_s=120.0)
    task = asyncio.ensure_future(db_executor.query(conn, SLOW_SQL[dialect], CTX))
    await wait_for_state(db, busy=True, limit_s=10)
    await asyncio.sleep(0.3)
    task.cancel()
    cancelled_at = time.perf_counter()
    await asyncio.wait({task})
    assert task.cancelled()
    assert time.perf_counter() - cancelled_at < 2.0
    # Stopped where it ran, not left to run on to its 120 s timeout...
    await wait_for_state(db, busy=False, limit_s=1)
    # ...and the connector's pool serves the next query.
    follow_up = await db_executor.run_query(conn, "SELECT COUNT(*) AS n FROM customers")
    assert follow_up.rows == [[50]]
