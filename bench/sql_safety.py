"""SQL safety cost: validation time per statement and query overhead vs the raw driver.

1. `check_sql` over the adversarial + legitimate corpora (tests/databases/corpus), per
   dialect: p50/p99 microseconds per statement.
2. `DatabaseExecutor.run_query` vs the same SELECT run directly with the driver on a warm
   connection, on a 1,000-row result (6 columns: int, text, numeric, timestamptz, bool,
   float), against throwaway Postgres / MariaDB databases and a SQLite file. Ratio of p50s;
   the target is ≤ 1.2x on Postgres. "quiver" clears the validation memo before every
   call (a first-seen statement pays for parsing); "memoised" is a repeated statement.
   Calls are interleaved one by one so both sides see the same machine load.

Run: `.venv/bin/python -m bench.sql_safety` (needs Postgres and MariaDB on 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiomysql
import aiosqlite
import asyncpg
import yaml

from app.databases.engines import EngineCache
from app.databases.models import DatabaseConnector
from app.databases.query import DatabaseExecutor
from app.databases.readonly import SqlSafetyError, check_sql, clear_validation_cache
from bench.common import percentile, print_table

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "databases" / "corpus"
DIALECTS = ("postgresql", "mysql", "sqlite")
ROWS = 1000
QUERY = "SELECT id, name, amount, created_at, active, score FROM bench_rows ORDER BY id"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _corpus() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for name in ("adversarial.yaml", "legitimate.yaml"):
        cases += yaml.safe_load((CORPUS / name).read_text("utf-8"))
    return cases


def bench_validation(repeats: int = 20) -> dict[str, dict[str, float]]:
    """Median time of `check_sql` per statement, summarised as p50/p99 per dialect."""
    out: dict[str, dict[str, float]] = {}
    cases = _corpus()
    for dialect in DIALECTS:
        per_statement: list[float] = []
        for case in cases:
            if dialect not in case.get("dialects", DIALECTS):
                continue
            samples = []
            for _ in range(repeats):
                started = time.perf_counter()
                with contextlib.suppress(SqlSafetyError):
                    check_sql(case["sql"], dialect=dialect, hidden_tables=["secrets"], cache=False)
                samples.append(time.perf_counter() - started)
            per_statement.append(statistics.median(samples) * 1e6)
        out[dialect] = {
            "statements": float(len(per_statement)),
            "p50_us": percentile(per_statement, 50),
            "p99_us": percentile(per_statement, 99),
            "max_us": max(per_statement),
        }
    return out


def _rows() -> list[tuple[Any, ...]]:
    import datetime as dt
    from decimal import Decimal

    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return [
        (i, f"name {i}", Decimal(i * 7 % 1000) / 100, base + dt.timedelta(minutes=i),
         i % 2 == 0, i / 3.0)
        for i in range(1, ROWS + 1)
    ]  # fmt: skip


def _connector(dialect: str, url: str) -> DatabaseConnector:
    return DatabaseConnector(
        id=uuid.uuid4(), name=f"bench_{dialect}", description="", url=url, dialect=dialect,
        read_only=True, max_rows=ROWS, query_timeout_s=30.0, schema_cache=[],
    )  # fmt: skip


_DDL = (
    "CREATE TABLE bench_rows (id INTEGER PRIMARY KEY, name VARCHAR(50), amount {numeric}, "
    "created_at {ts}, active BOOLEAN, score DOUBLE PRECISION)"
)


async def _bench_postgres(iterations: int) -> dict[str, float]:
    name = f"quiver_bench_{secrets.token_hex(4)}"
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    admin = await asyncpg.connect(PG_ADMIN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(_DDL.format(numeric="NUMERIC(10,2)", ts="TIMESTAMPTZ"))
            await conn.executemany("INSERT INTO bench_rows VALUES ($1,$2,$3,$4,$5,$6)", _rows())

            async def direct() -> Any:
                return await conn.fetch(QUERY)

            return await _compare("postgresql", url, direct, iterations)
        finally:
            await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def _bench_mysql(iterations: int) -> dict[str, float]:
    name = f"quiver_bench_{secrets.token_hex(4)}"
    conn = await aiomysql.connect(host="127.0.0.1", port=3306, user="root", password="",
                                  autocommit=True)  # fmt: skip
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"CREATE DATABASE `{name}`")
            await cur.execute(f"USE `{name}`")
            await cur.execute(_DDL.format(numeric="DECIMAL(10,2)", ts="DATETIME"))
            rows = [(*r[:3], r[3].replace(tzinfo=None), *r[4:]) for r in _rows()]
            await cur.executemany("INSERT INTO bench_rows VALUES (%s,%s,%s,%s,%s,%s)", rows)

        async def direct() -> Any:
            async with conn.cursor() as cur:
                await cur.execute(QUERY)
                return await cur.fetchall()

        url = f"mysql://root@127.0.0.1:3306/{name}"
        return await _compare("mysql", url, direct, iterations)
    finally:
        async with conn.cursor() as cur:
            await cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()


async def _bench_sqlite(iterations: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/bench.sqlite3"
        with sqlite3.connect(path) as setup:
            setup.execute(_DDL.format(numeric="DECIMAL(10,2)", ts="TIMESTAMP"))
            rows = [(*r[:2], float(r[2]), r[3].isoformat(), *r[4:]) for r in _rows()]
            setup.executemany("INSERT INTO bench_rows VALUES (?,?,?,?,?,?)", rows)
        setup.close()
        async with aiosqlite.connect(path) as conn:

            async def direct() -> Any:
                async with conn.execute(QUERY) as cur:
                    return await cur.fetchall()

            return await _compare("sqlite", f"sqlite:///{path}", direct, iterations)


async def _compare(
    dialect: str, url: str, direct: Callable[[], Awaitable[Any]], iterations: int
) -> dict[str, float]:
    engines = EngineCache()
    executor = DatabaseExecutor(engines)
    connector = _connector(dialect, url)
    try:
        result = await executor.run_query(connector, QUERY)
        if result.row_count != ROWS or result.truncated:
            raise RuntimeError(f"unexpected result: {result.row_count} rows")

        async def ours() -> Any:
            clear_validation_cache()  # every call pays for parsing and validation
            return await executor.run_query(connector, QUERY)

        async def ours_memoised() -> Any:
            return await executor.run_query(connector, QUERY)

        for _ in range(20):  # warm caches (statements, pool)
            await direct()
            await ours_memoised()
        samples: dict[str, list[float]] = {"raw": [], "cold": [], "warm": []}
        calls = {"raw": direct, "cold": ours, "warm": ours_memoised}
        for i in range(iterations):  # interleaved call by call: all see the same load
            order = list(calls.items())
            for name, call in order[i % 3 :] + order[: i % 3]:
                started = time.perf_counter()
                await call()
                samples[name].append((time.perf_counter() - started) * 1000)
    finally:
        await engines.aclose()
    raw, cold, warm = samples["raw"], samples["cold"], samples["warm"]
    p50_raw, p50_cold, p50_warm = (statistics.median(x) for x in (raw, cold, warm))
    return {
        "direct_p50_ms": p50_raw,
        "quiver_p50_ms": p50_cold,
        "ratio": p50_cold / p50_raw,
        "memoised_p50_ms": p50_warm,
        "memoised_ratio": p50_warm / p50_raw,
    }


async def bench_overhead(iterations: int = 300) -> dict[str, dict[str, float]]:
    return {
        "postgresql": await _bench_postgres(iterations),
        "mysql": await _bench_mysql(iterations),
        "sqlite": await _bench_sqlite(iterations),
    }


def run() -> dict[str, Any]:
    """Run both parts, print two tables and return the numbers."""
    validation = bench_validation()
    overhead = asyncio.run(bench_overhead())
    print("Validation (check_sql, median of 20 runs per statement, corpus)")
    print_table(
        [[d, int(v["statements"]), v["p50_us"], v["p99_us"], v["max_us"]]
         for d, v in validation.items()],
        ["dialect", "statements", "p50 µs", "p99 µs", "max µs"],
    )  # fmt: skip
    print()
    print(f"Query overhead on a {ROWS}-row result (p50 ms; target ratio ≤ 1.2 on postgresql)")
    print_table(
        [[d, v["direct_p50_ms"], v["quiver_p50_ms"], v["ratio"], v["memoised_p50_ms"],
          v["memoised_ratio"]] for d, v in overhead.items()],
        ["dialect", "driver", "quiver", "ratio", "quiver (memoised check)", "ratio"],
    )  # fmt: skip
    return {"validation": validation, "overhead": overhead}


if __name__ == "__main__":
    run()
