"""The conversion workers: a call past its time is stopped (its worker killed and replaced),
a worker that dies or runs out of memory is a typed failure, and the pool goes on serving."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from types import FrameType

import pebble
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


def _waiting_for_workers() -> bool:
    """Whether some thread is in `ConversionPool._wait_ready`."""
    for frame in sys._current_frames().values():
        current: FrameType | None = frame
        while current is not None:
            if current.f_code.co_name == "_wait_ready":
                return True
            current = current.f_back
    return False


async def test_closing_while_the_workers_start_leaves_no_thread_waiting() -> None:
    """An app stopped right after it started: the start-up wait (in a thread) ends with the
    pool, instead of holding a thread (and the process's exit) for its 120 s limit."""
    fresh = ConversionPool(workers=1, timeout_s=5, memory_bytes=512 * 2**20)
    # a first worker that takes 60 s to start: the wait for it is still on when we close
    fresh._pool = pebble.ProcessPool(max_workers=1, initializer=time.sleep, initargs=(60,))
    warming = asyncio.create_task(fresh.warm())
    for _ in range(1000):
        if _waiting_for_workers():
            break
        await asyncio.sleep(0.01)
    assert _waiting_for_workers()
    await fresh.aclose()
    await asyncio.wait_for(warming, 5)  # warm() logs the failure and returns
    await asyncio.sleep(0.5)
    assert not _waiting_for_workers()
