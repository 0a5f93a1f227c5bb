"""The conversion workers: a call past its time is stopped (its worker killed and replaced),
a worker that dies or runs out of memory is a typed failure, and the pool goes on serving."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

import pytest

from app.convert.pool import ConversionPool
from app.errors import Invalid


def _allocate(n: int) -> int:
    return len(bytearray(n))


def _die() -> None:
    os._exit(3)


def _pid() -> int:
    return os.getpid()


@pytest.fixture
async def pool() -> AsyncIterator[ConversionPool]:
    converter = ConversionPool(workers=1, timeout_s=20.0, memory_bytes=1024 * 1024 * 1024)
    yield converter
    await converter.aclose()


async def test_a_stuck_call_is_stopped_and_the_worker_replaced(pool: ConversionPool) -> None:
    first = await pool.run(_pid, what="pid")
    started = time.monotonic()
    with pytest.raises(Invalid, match=r"the page: not converted within 0.5 s"):
        await pool.run(time.sleep, 30, what="the page", timeout_s=0.5)
    assert time.monotonic() - started < 5
    after = await pool.run(_pid, what="pid")
    assert after != first  # the stuck worker was killed, a new one answers


async def test_cancelling_the_caller_stops_the_worker(pool: ConversionPool) -> None:
    first = await pool.run(_pid, what="pid")
    task = asyncio.create_task(pool.run(time.sleep, 30, what="slow"))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.wait_for(pool.run(_pid, what="pid"), 10) != first


async def test_memory_and_crashes_are_typed_failures(pool: ConversionPool) -> None:
    with pytest.raises(Invalid, match="too large to convert"):
        await pool.run(_allocate, 4 * 1024 * 1024 * 1024, what="the bomb")
    assert await pool.run(_allocate, 1024, what="small") == 1024
    with pytest.raises(Invalid, match="the converter stopped"):
        await pool.run(_die, what="the crash")
    assert await pool.run(_allocate, 10, what="small") == 10
