"""Session lifecycle of `McpPool` against real MCP servers: reuse, races, crashes, timeouts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from app.mcp.pool import McpPool
from app.tools.base import CallContext
from tests.mcp.servers import HttpMcpServer, stdio_row, url_row

CTX = CallContext(run_id="run-1")


async def _stats(pool: McpPool, row: object) -> dict[str, object]:
    result = await pool.call(row, "stats", {}, CTX)  # type: ignore[arg-type]
    assert result.ok, result.error
    data: dict[str, object] = json.loads(result.output)
    return data


async def test_stdio_session_is_reused_across_50_calls(pool: McpPool) -> None:
    row = stdio_row()
    results = [await pool.call(row, "add", {"a": i, "b": 1}, CTX) for i in range(50)]
    assert [r.output for r in results] == [str(i + 1) for i in range(50)]
    stats = await _stats(pool, row)
    assert stats["handshakes"] == 1
    assert pool.connects == 1


@pytest.mark.parametrize("kind", ["sse", "http"])
async def test_remote_session_is_reused_across_50_calls(
    pool: McpPool, kind: str, sse_server: HttpMcpServer, http_server: HttpMcpServer
) -> None:
    server = sse_server if kind == "sse" else http_server
    row = url_row(server)
    before = server.handshakes
    for i in range(50):
        result = await pool.call(row, "echo", {"text": f"x{i}"}, CTX)
        assert result.ok
        assert result.output == f"x{i}"
    assert server.handshakes - before == 1
    assert pool.connects == 1


async def test_racing_first_calls_share_one_connect(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    row = url_row(http_server)
    before = http_server.handshakes
    results = await asyncio.gather(
        *(pool.call(row, "add", {"a": i, "b": i}, CTX) for i in range(20))
    )
    assert [r.output for r in results] == [str(2 * i) for i in range(20)]
    assert pool.connects == 1
    assert http_server.handshakes - before == 1


async def test_several_servers_connect_concurrently(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    rows = [url_row(http_server, f"srv_{i}") for i in range(4)]
    counting = http_server.counting
    assert counting is not None
    counting.handshake_delay, counting.max_inflight = 1.0, 0
    try:
        results = await asyncio.gather(*(pool.call(r, "add", {"a": 1, "b": 1}, CTX) for r in rows))
    finally:
        counting.handshake_delay = 0.0
    assert all(r.ok for r in results)
    assert pool.connects == 4
    assert counting.max_inflight == 4, "the four handshakes did not overlap"


async def test_crash_mid_call_is_an_error_then_the_next_call_reconnects(
    pool: McpPool,
) -> None:
    row = stdio_row()
    pid = (await _stats(pool, row))["pid"]
    crashed = await pool.call(row, "crash", {}, CTX)
    # The process exited with the call in flight: it may have run, so it is not run again.
    assert not crashed.ok
    assert crashed.retryable
    assert "exited during 'crash' (not retried" in (crashed.error or "")
    assert crashed.step == "mcp:ours/crash"
    assert pool.connects == 1
    after = await pool.call(row, "add", {"a": 2, "b": 3}, CTX)
    assert after.ok
    assert after.output == "5"
    assert pool.connects == 2
    assert (await _stats(pool, row))["pid"] != pid


async def test_a_process_killed_mid_call_fails_the_call_at_once(pool: McpPool) -> None:
    """Killed from outside during a 30 s call: noticed with the process, not at the timeout."""
    row = stdio_row(call_timeout_s=8.0)
    pid = (await _stats(pool, row))["pid"]
    assert isinstance(pid, int)

    async def kill_soon() -> None:
        await asyncio.sleep(0.5)
        os.kill(pid, signal.SIGKILL)

    killer = asyncio.create_task(kill_soon())
    started = time.monotonic()
    result = await pool.call(row, "slow", {"seconds": 30}, CTX)
    elapsed = time.monotonic() - started
    await killer
    assert not result.ok
    assert result.retryable
    assert "exited during 'slow' (not retried" in (result.error or ""), result.error
    assert elapsed < 3.0, elapsed  # the call timeout is 8 s
    assert pool.connects == 1  # the call was not sent again to a new process


async def test_a_process_killed_while_idle_is_replaced_before_the_next_call(
    pool: McpPool,
) -> None:
    row = stdio_row()
    pid = (await _stats(pool, row))["pid"]
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):  # the session notices the end of its connection by itself
        if not any(e.session is not None and e.session.alive for e in pool._entries.values()):
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the dead process was not noticed")
    result = await pool.call(row, "add", {"a": 1, "b": 2}, CTX)
    assert (result.ok, result.output) == (True, "3")
    assert pool.connects == 2
    assert (await _stats(pool, row))["pid"] != pid


async def test_an_expired_session_is_reconnected_once_and_the_call_retried(
    pool: McpPool,
) -> None:
    # A handshake-era streamable HTTP server restarted: it no longer knows our session id.
    server = await HttpMcpServer("streamable_http", legacy=True).astart()
    row = url_row(server)
    try:
        assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
        port = server.port
        await server.astop()
        server = await HttpMcpServer("streamable_http", port=port, legacy=True).astart()
        result = await pool.call(row, "add", {"a": 20, "b": 22}, CTX)
        assert result.ok, result.error
        assert result.output == "42"
        assert pool.connects == 2
        assert server.counting is not None
        assert server.counting.methods["initialize"] == 1
    finally:
        await server.astop()


async def test_call_timeout_is_an_error_and_the_session_survives(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    row = url_row(http_server, call_timeout_s=0.5)
    assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
    started = time.perf_counter()
    result = await pool.call(row, "slow", {"seconds": 5}, CTX)
    assert time.perf_counter() - started < 2.0
    assert not result.ok
    assert result.retryable
    assert "timed out after 0.5s" in (result.error or "")
    assert (await pool.call(row, "add", {"a": 1, "b": 2}, CTX)).output == "3"
    assert pool.connects == 1


async def test_connect_timeout_is_an_error_observation(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    row = url_row(http_server, connect_timeout_s=0.5)
    assert http_server.counting is not None
    http_server.counting.handshake_delay = 3.0
    try:
        started = time.perf_counter()
        result = await pool.call(row, "add", {"a": 1, "b": 1}, CTX)
        elapsed = time.perf_counter() - started
    finally:
        http_server.counting.handshake_delay = 0.0
    assert elapsed < 2.0
    assert not result.ok
    assert result.retryable
    assert "timed out after 0.5s" in (result.error or "")
    assert pool.connects == 0


async def test_down_server_fails_fast_with_backoff_then_recovers(pool: McpPool) -> None:
    server = await HttpMcpServer("streamable_http").astart()
    port = server.port
    row = url_row(server)
    try:
        assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
        await server.astop()
        down = await pool.call(row, "add", {"a": 1, "b": 1}, CTX)
        assert not down.ok
        assert down.retryable
        started = time.perf_counter()
        fast = await pool.call(row, "add", {"a": 1, "b": 1}, CTX)
        assert time.perf_counter() - started < 0.1
        assert "next connection attempt in" in (fast.error or "")
        server = await HttpMcpServer("streamable_http", port=port).astart()
        await asyncio.sleep(0.7)  # past the backoff (base 0.3s, doubled once at most)
        back = await pool.call(row, "add", {"a": 2, "b": 2}, CTX)
        assert back.ok
        assert back.output == "4"
    finally:
        await server.astop()


async def test_a_failing_server_degrades_only_its_own_tools(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    good = url_row(http_server, "good")
    bad = url_row(http_server, "bad", url="http://127.0.0.1:9/mcp", connect_timeout_s=2.0)
    bad_result, good_result = await asyncio.gather(
        pool.call(bad, "add", {"a": 1, "b": 1}, CTX),
        pool.call(good, "add", {"a": 1, "b": 1}, CTX),
    )
    assert good_result.ok
    assert good_result.output == "2"
    assert not bad_result.ok
    assert "'bad'" in (bad_result.error or "")


async def test_invalidate_closes_the_session_and_next_call_reconnects(
    pool: McpPool, sse_server: HttpMcpServer
) -> None:
    row = url_row(sse_server)
    before = sse_server.handshakes
    assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
    await pool.invalidate(row.id)
    assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
    assert sse_server.handshakes - before == 2
    assert pool.connects == 2


async def test_changed_configuration_opens_a_new_session(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    row = url_row(http_server)
    assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
    row.headers = {"X-Tenant": "two"}
    assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
    assert pool.connects == 2


async def test_aclose_stops_every_session(mcp_settings: object, http_server: HttpMcpServer) -> None:
    pool = McpPool(mcp_settings)  # type: ignore[arg-type]
    stdio = stdio_row()
    remote = url_row(http_server)
    pid = (await _stats(pool, stdio))["pid"]
    assert (await pool.call(remote, "add", {"a": 1, "b": 1}, CTX)).ok
    await pool.aclose()
    assert isinstance(pid, int)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    after = await pool.call(remote, "add", {"a": 1, "b": 1}, CTX)
    assert not after.ok
    assert "shut down" in (after.error or "")


async def test_server_side_errors_keep_the_session(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    row = url_row(http_server)
    failed = await pool.call(row, "fail", {"message": "no such issue"}, CTX)
    assert not failed.ok
    assert "no such issue" in (failed.error or "")
    unknown = await pool.call(row, "nope", {}, CTX)
    assert not unknown.ok
    assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
    assert pool.connects == 1
