"""One cancel watcher per run: the guarded await stops at once, other cancellations pass."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.chat.loop import CancelWatch
from app.chat.steps import RunCancelled


async def test_cancel_interrupts_the_guarded_await_and_leaves_the_task_usable() -> None:
    cancel = asyncio.Event()
    watch = CancelWatch(cancel)
    assert await watch.guard(asyncio.sleep(0, "first")) == "first"
    asyncio.get_running_loop().call_later(0.05, cancel.set)
    started = time.perf_counter()
    with pytest.raises(RunCancelled):
        await watch.guard(asyncio.sleep(10))
    assert time.perf_counter() - started < 1.0
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # our cancellation was taken back
    with pytest.raises(TimeoutError):  # so timeouts in this task still work
        async with asyncio.timeout(0.01):
            await asyncio.sleep(1)
    with pytest.raises(RunCancelled):  # once cancelled, a new guard refuses at once
        await watch.guard(asyncio.sleep(10))
    watch.close()


async def test_a_cancellation_from_elsewhere_is_not_a_run_cancel() -> None:
    watch = CancelWatch(asyncio.Event())

    async def guarded() -> None:
        await watch.guard(asyncio.sleep(10))

    task = asyncio.create_task(guarded())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    watch.close()


async def test_one_watcher_task_for_many_guarded_awaits() -> None:
    watch = CancelWatch(asyncio.Event())
    before = len(asyncio.all_tasks())
    for _ in range(50):
        await watch.guard(asyncio.sleep(0))
    assert len(asyncio.all_tasks()) == before + 1
    watch.close()
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == before
