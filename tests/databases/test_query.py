"""`database query` against real Postgres, MariaDB and SQLite (SPEC §7.2)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from app.databases.engines import EngineCache
from app.databases.models import DatabaseConnector
from app.databases.query import DatabaseExecutor, QueryFailed, QueryRefused, QueryTimeout
from app.tools.base import CallContext
from tests.databases.cases import ADVERSARIAL, LEGITIMATE, Case, for_dialect, params
from tests.databases.conftest import DIALECTS, make_connector
from tests.databases.seed import BIG_ROWS, SeededDb

DEAD_URLS = {
    "postgresql": "postgresql://postgres:pw@127.0.0.1:1/nothing",
    "mysql": "mysql://root:pw@127.0.0.1:1/nothing",
    "sqlite": "sqlite:////nonexistent/quiver/dead.sqlite3",
}
CTX = CallContext(run_id="test-run")


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_adversarial_corpus_is_refused_before_any_connection_is_made(
    dialect: str, db_executor: DatabaseExecutor
) -> None:
    dead = make_connector(SeededDb(dialect, DEAD_URLS[dialect], "dead"), query_timeout_s=2.0)
    results = {
        c.id: await db_executor.query(dead, c.sql, CTX) for c in for_dialect(ADVERSARIAL, dialect)
    }
    wrong = {
        k: r.text
        for k, r in results.items()
        if not (r.error or "").startswith("[SQL Safety Error]")
    }
    assert wrong == {}
    # The URL really is dead: a legitimate query gets as far as the driver and fails there.
    probe = await db_executor.query(dead, "SELECT 1", CTX)
    assert probe.error is not None
    assert probe.error.startswith("[Database Error]")


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_adversarial_corpus_leaves_the_live_database_unchanged(
    dialect: str,
    db_executor: DatabaseExecutor,
    connectors: dict[str, DatabaseConnector],
    seeded: dict[str, SeededDb],
    snapshot: Callable[[SeededDb], Any],
) -> None:
    before = await snapshot(seeded[dialect])
    for case in for_dialect(ADVERSARIAL, dialect):
        result = await db_executor.query(connectors[dialect], case.sql, CTX)
        assert not result.ok, case.id
        assert (result.error or "").startswith("[SQL Safety Error]"), (case.id, result.error)
        assert result.retryable is False
    after = await snapshot(seeded[dialect])
    assert after == before
    assert after["counts"]["orders"] == 400
    assert after["counts"]["secrets"] == 2


@pytest.mark.parametrize(("dialect", "case"), params(LEGITIMATE))
async def test_legitimate_analytics_query_runs(
    dialect: str,
    case: Case,
    db_executor: DatabaseExecutor,
    connectors: dict[str, DatabaseConnector],
) -> None:
    result = await db_executor.run_query(connectors[dialect], case.sql)
    assert result.columns
    assert result.truncated is False
    if case.rows is not None:
        assert result.row_count == case.rows == len(result.rows)
    json.dumps(result.rows)


async def test_analytics_results_are_correct(
    db_executor: DatabaseExecutor, connectors: dict[str, DatabaseConnector]
) -> None:
    sql = (
        "SELECT c.country, COUNT(*) AS n FROM orders o JOIN customers c ON c.id = o.customer_id "
        "GROUP BY c.country ORDER BY c.country"
    )
    expected = [["DE", 96], ["FR", 104], ["JP", 96], ["US", 104]]
    for dialect in DIALECTS:
        result = await db_executor.run_query(connectors[dialect], sql)
        assert result.columns == ["country", "n"]
        assert result.rows == expected, dialect


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
async def test_user_defined_function_that_writes_is_stopped_by_the_read_only_transaction(
    dialect: str,
    db_executor: DatabaseExecutor,
    connectors: dict[str, DatabaseConnector],
    seeded: dict[str, SeededDb],
    snapshot: Callable[[SeededDb], Any],
) -> None:
    before = await snapshot(seeded[dialect])
    result = await db_executor.query(connectors[dialect], "SELECT evil_write() AS x", CTX)
    assert result.error is not None
    assert result.error.startswith("[Database Error]")
    assert "read-only transaction" in result.error.lower() or "READ ONLY" in result.error
    assert await snapshot(seeded[dialect]) == before


async def test_explicit_read_only_transaction_path_also_stops_writing_functions(
    db_executor: DatabaseExecutor, connectors: dict[str, DatabaseConnector]
) -> None:
    # A per-call timeout differs from the session's, so BEGIN READ ONLY + SET LOCAL is used.
    with pytest.raises(QueryFailed, match="read-only transaction"):
        await db_executor.run_query(connectors["postgresql"], "SELECT evil_write()", timeout_s=3)


async def test_a_function_that_reopens_writes_gets_its_connection_discarded(
    db_executor: DatabaseExecutor,
    seeded: dict[str, SeededDb],
    snapshot: Callable[[SeededDb], Any],
) -> None:
    conn = make_connector(seeded["postgresql"])
    before = await snapshot(seeded["postgresql"])
    flipped = await db_executor.run_query(conn, "SELECT reopen_writes() AS v")
    assert flipped.rows == [["off"]]
    for _ in range(12):  # more than the pool holds: every connection is read-only again
        setting = await db_executor.run_query(
            conn, "SELECT current_setting('default_transaction_read_only') AS v"
        )
        assert setting.rows == [["on"]]
        refused = await db_executor.query(conn, "SELECT evil_write()", CTX)
        assert "read-only transaction" in (refused.error or "")
    assert await snapshot(seeded["postgresql"]) == before


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgresql", "SELECT count(*) FROM generate_series(1, 2000000000)"),
        ("mysql", "SELECT count(*) FROM big_numbers a, big_numbers b, big_numbers c"),
        ("sqlite", "SELECT count(*) FROM big_numbers a, big_numbers b, big_numbers c"),
    ],
)
async def test_long_query_is_stopped_by_the_statement_timeout(
    dialect: str, sql: str, db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    conn = make_connector(seeded[dialect], query_timeout_s=1.0)
    started = time.perf_counter()
    result = await db_executor.query(conn, sql, CTX)
    elapsed = time.perf_counter() - started
    assert result.error is not None
    assert result.error.startswith("[Timeout]"), result.error
    assert result.retryable is True
    assert elapsed < 4.0
    # The pooled connection is still healthy afterwards.
    follow_up = await db_executor.run_query(conn, "SELECT COUNT(*) AS n FROM customers")
    assert follow_up.rows == [[50]]


async def test_postgres_timeout_in_a_user_function_is_enforced_server_side(
    db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    conn = make_connector(seeded["postgresql"], query_timeout_s=0.5)
    with pytest.raises(QueryTimeout, match=r"^\[Timeout\]"):
        await db_executor.run_query(conn, "SELECT slow_value(1)")


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_ten_thousand_rows_come_back_capped_and_flagged(
    dialect: str, db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    conn = make_connector(seeded[dialect], max_rows=10_000)
    capped = await db_executor.run_query(conn, "SELECT n, label FROM big_numbers ORDER BY n")
    assert BIG_ROWS > 10_000
    assert (capped.row_count, len(capped.rows), capped.truncated) == (10_000, 10_000, True)
    assert capped.rows[-1] == [10_000, "n10000"]
    exact = await db_executor.run_query(conn, "SELECT n FROM big_numbers WHERE n <= 10000")
    assert (exact.row_count, exact.truncated) == (10_000, False)
    # The truncated session was discarded or cleaned; the connector keeps working.
    again = await db_executor.run_query(conn, "SELECT COUNT(*) AS n FROM big_numbers")
    assert again.rows == [[BIG_ROWS]]


async def test_the_row_cap_also_applies_to_explicit_large_limits(
    db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    for dialect in DIALECTS:
        conn = make_connector(seeded[dialect], max_rows=5)
        result = await db_executor.run_query(conn, "SELECT n FROM big_numbers ORDER BY n LIMIT 100")
        assert (result.rows, result.truncated) == ([[1], [2], [3], [4], [5]], True)


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_values_are_json_safe(
    dialect: str, db_executor: DatabaseExecutor, connectors: dict[str, DatabaseConnector]
) -> None:
    result = await db_executor.run_query(connectors[dialect], "SELECT * FROM kinds")
    row = dict(zip(result.columns, result.rows[0], strict=True))
    json.dumps(result.rows, allow_nan=False)
    assert row["b"] == "\\xdeadbeef"
    if dialect == "postgresql":
        assert row["u"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
        assert row["d"] == "12345678901234567890.0123456789"
        assert row["t"] == "2024-05-01 10:00:00+00"
        assert row["i"] == "1 day 02:00:00"
        assert row["j"] == {"k": [1, 2]}
        assert row["ip"] == "10.0.0.1"
        assert row["f"] == "nan"
        assert row["arr"] == [1, 2, 3]
    if dialect == "mysql":
        assert row["d"] == "12345678901234567890.0123456789"
        assert row["t"] == "2024-05-01 10:00:00.500000"
        assert row["tm"] == "26:00:00"
        assert row["s"] in ("a,c", ["a", "c"])


async def test_tool_result_is_compact_json_of_the_query_result(
    db_executor: DatabaseExecutor, connectors: dict[str, DatabaseConnector]
) -> None:
    result = await db_executor.query(
        connectors["postgresql"], "SELECT id, name FROM customers ORDER BY id LIMIT 2", CTX
    )
    assert result.ok
    body = json.loads(result.output)
    assert set(body) == {"columns", "rows", "row_count", "truncated", "elapsed_ms"}
    assert body["rows"] == [[1, "Customer 1"], [2, "Customer 2"]]
    assert ", " not in result.output


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_database_errors_are_typed_and_keep_the_connector_usable(
    dialect: str, db_executor: DatabaseExecutor, connectors: dict[str, DatabaseConnector]
) -> None:
    result = await db_executor.query(connectors[dialect], "SELECT no_such_column FROM orders", CTX)
    assert result.error is not None
    assert result.error.startswith("[Database Error]")
    assert "no_such_column" in result.error
    assert result.retryable is True
    ok = await db_executor.run_query(connectors[dialect], "SELECT COUNT(*) FROM orders")
    assert ok.rows == [[400]]


async def test_run_query_raises_typed_quiver_errors(
    db_executor: DatabaseExecutor, connectors: dict[str, DatabaseConnector]
) -> None:
    with pytest.raises(QueryRefused) as refused:
        await db_executor.run_query(connectors["sqlite"], "DELETE FROM orders")
    assert refused.value.status_code == 422
    assert refused.value.message.startswith("[SQL Safety Error] ")
    with pytest.raises(QueryFailed) as failed:
        await db_executor.run_query(connectors["sqlite"], "SELECT * FROM nope")
    assert failed.value.status_code == 502


async def test_errors_never_reveal_the_url_or_password(
    db_executor: DatabaseExecutor, mysql_db: SeededDb
) -> None:
    url = f"mysql://root:Sup3rS3cretPw@127.0.0.1:3306/{mysql_db.name}"
    conn = make_connector(mysql_db, url=url)
    result = await db_executor.query(conn, "SELECT 1", CTX)
    assert result.error is not None
    assert result.error.startswith("[Database Error]")
    assert "Access denied" in result.error
    assert "Sup3rS3cretPw" not in result.error
    assert url not in result.error


async def test_write_mode_runs_exactly_one_statement_and_commits(
    db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    for dialect in DIALECTS:
        writer = make_connector(seeded[dialect], read_only=False)
        inserted = await db_executor.run_query(
            writer, "INSERT INTO audit_log (id, note) VALUES (5000, 'written')"
        )
        assert inserted.row_count == 1, dialect
        stacked = await db_executor.query(
            writer, "DELETE FROM audit_log WHERE id = 5000; DELETE FROM audit_log", CTX
        )
        assert (stacked.error or "").startswith("[SQL Safety Error] exactly one statement")
        deleted = await db_executor.run_query(writer, "DELETE FROM audit_log WHERE id = 5000")
        assert deleted.row_count == 1, dialect
        count = await db_executor.run_query(writer, "SELECT COUNT(*) FROM audit_log")
        assert count.rows == [[1]]


async def test_query_and_engine_are_reused_across_calls(
    db_executor: DatabaseExecutor,
    connectors: dict[str, DatabaseConnector],
    engine_cache: EngineCache,
) -> None:
    engine = await engine_cache.get(connectors["postgresql"])
    for _ in range(3):
        await db_executor.run_query(connectors["postgresql"], "SELECT 1")
    assert await engine_cache.get(connectors["postgresql"]) is engine


async def test_a_connection_dropped_by_the_server_is_replaced_for_reads(
    db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    import aiomysql
    import asyncpg

    pg = make_connector(seeded["postgresql"])
    my = make_connector(seeded["mysql"])
    for conn in (pg, my):
        assert (await db_executor.run_query(conn, "SELECT 1 AS one")).rows == [[1]]
    admin = await asyncpg.connect(seeded["postgresql"].url)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'quiver' AND datname = current_database()"
        )
    finally:
        await admin.close()
    killer = await aiomysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    try:
        async with killer.cursor() as cur:
            await cur.execute(
                "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> "
                "CONNECTION_ID()", (seeded["mysql"].name,)
            )  # fmt: skip
            for (pid,) in await cur.fetchall():
                await cur.execute(f"KILL {int(pid)}")
    finally:
        killer.close()
    for conn in (pg, my):
        assert (await db_executor.run_query(conn, "SELECT 2 AS two")).rows == [[2]]


@pytest.mark.parametrize("loop_turns", [0, 1, 2, 3, -1])
async def test_a_read_right_after_the_server_killed_its_connection_is_retried(
    loop_turns: int, db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    """The server's goodbye (FATAL 57P01) and its closing of the socket arrive separately; a
    read may start before either, between them (the driver's protocol is then stuck consuming
    the unexpected error) or after both. Every case is a dropped connection, retried once."""
    import asyncio
    import time

    import asyncpg

    pg = make_connector(seeded["postgresql"])
    assert (await db_executor.run_query(pg, "SELECT 1 AS one")).rows == [[1]]
    admin = await asyncpg.connect(seeded["postgresql"].url)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'quiver' AND datname = current_database()"
        )
    finally:
        await admin.close()
    time.sleep(0.3)  # noqa: ASYNC251 - both the error and the close are now queued, unread
    if loop_turns < 0:
        await asyncio.sleep(0.3)
    for _ in range(max(loop_turns, 0)):
        await asyncio.sleep(0)
    assert (await db_executor.run_query(pg, "SELECT 2 AS two")).rows == [[2]]


async def test_a_connector_whose_dialect_disagrees_with_its_url_fails_cleanly(
    db_executor: DatabaseExecutor, seeded: dict[str, SeededDb]
) -> None:
    wrong = make_connector(seeded["postgresql"], dialect="sqlite")
    result = await db_executor.query(wrong, "SELECT 1", CTX)
    assert (result.error or "").startswith("[Database Error] the connector's dialect")


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_concurrent_queries_share_the_pool_safely(
    dialect: str, db_executor: DatabaseExecutor, connectors: dict[str, DatabaseConnector]
) -> None:
    import asyncio

    sql = "SELECT COUNT(*) AS n FROM orders WHERE customer_id = {}"
    results = await asyncio.gather(
        *(db_executor.run_query(connectors[dialect], sql.format(i % 50 + 1)) for i in range(25))
    )
    assert [r.rows for r in results] == [[[8]]] * 25
