"""The worker processes every conversion runs in: never on the event loop (a thread would not
do: parsing in Python holds the GIL), each call bounded in time and memory.

A call past its time is stopped by killing its worker (pebble replaces it), so a hostile page
or document costs at most `QUIVER_CONVERT_TIMEOUT_S` of one worker and never stalls the
process. Workers are forked from a clean `forkserver` process on first use (nothing of the
parent's event loop, threads or connections is inherited; a replaced worker starts in
milliseconds) and limited to `QUIVER_CONVERT_MEMORY_MB` of address space, so a
decompression bomb ends in a `MemoryError` (a clear 422), not in the OOM killer.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar, cast

import pebble
from pebble import ProcessExpired

from app.convert.html import Page, html_to_page
from app.errors import Invalid

T = TypeVar("T")
log = logging.getLogger(__name__)


def _context() -> multiprocessing.context.BaseContext:
    """`forkserver`: a clean server process (spawned once per process, with the converters
    imported) forks each worker, so starting or replacing one takes milliseconds."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["app.convert.pool"])
    return context


def _limit_memory(max_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))


def _ready() -> None:
    """The first call: returns once a worker is up."""


class ConversionPool:
    def __init__(self, *, workers: int, timeout_s: float, memory_bytes: int) -> None:
        self.timeout_s = timeout_s
        self._workers = workers
        self._memory_bytes = memory_bytes
        self._pool: pebble.ProcessPool | None = None
        self._starting = asyncio.Lock()
        self._ready = False

    async def _started(self) -> pebble.ProcessPool:
        """The pool, its workers started in a thread on first use (starting the fork server
        and forking take a while; the event loop must not wait for them)."""
        if self._pool is not None and self._ready:
            return self._pool
        async with self._starting:
            if self._pool is None:  # kept before it is ready, so `close` always stops it
                self._pool = pebble.ProcessPool(
                    max_workers=self._workers,
                    initializer=_limit_memory,
                    initargs=(self._memory_bytes,),
                    context=_context(),
                )
            pool = self._pool
            if not self._ready:
                await asyncio.to_thread(self._wait_ready, pool)
                self._ready = True
        return pool

    def _wait_ready(self, pool: pebble.ProcessPool, limit_s: float = 120.0) -> None:
        """Wait (in a thread) for the first worker, giving up at once when the pool is closed
        meanwhile: a stopped pool never resolves the call, and a thread left waiting for it
        would hold up the process's exit (an app stopped right after it started)."""
        future = pool.schedule(_ready)
        deadline = time.monotonic() + limit_s
        while True:
            try:
                future.result(timeout=0.2)
                return
            except FutureTimeout:
                if self._pool is not pool:
                    future.cancel()  # type: ignore[no-untyped-call]
                    raise RuntimeError("conversion workers closed while starting") from None
                if time.monotonic() > deadline:
                    raise

    async def warm(self) -> None:
        """Start the workers now (the app does, in the background, at start-up), so that
        the first page is not also the one that waits for them."""
        try:
            await self._started()
        except Exception:  # the first real call will say what is wrong
            log.warning("conversion workers did not start", exc_info=True)

    async def run(
        self, fn: Callable[..., T], *args: Any, what: str, timeout_s: float | None = None
    ) -> T:
        """`fn(*args)` in a worker. `Invalid` names `what` when it fails, runs out of time or
        memory; cancelling the caller stops the worker."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        future = (await self._started()).schedule(fn, args=args, timeout=limit)
        try:
            return cast(T, await asyncio.wrap_future(future))
        except Invalid:
            raise
        except FutureTimeout as exc:
            raise Invalid(
                f"{what}: not converted within {limit:g} s (QUIVER_CONVERT_TIMEOUT_S); "
                "the conversion was stopped"
            ) from exc
        except ProcessExpired as exc:
            raise Invalid(
                f"{what}: the converter stopped ({exc}); it may need more than "
                "QUIVER_CONVERT_MEMORY_MB"
            ) from exc
        except MemoryError as exc:
            raise Invalid(f"{what}: too large to convert (QUIVER_CONVERT_MEMORY_MB)") from exc
        except Exception as exc:  # the converter's own bug: still the caller's typed failure
            raise Invalid(f"{what}: conversion failed ({type(exc).__name__}: {exc})") from exc

    async def page(self, html: str) -> Page:
        """A web page's title and text (`http_fetch`)."""
        return await self.run(html_to_page, html, what="the page")

    def close(self) -> None:
        """Stop the workers (a call in flight fails); the next call starts new ones."""
        pool, self._pool, self._ready = self._pool, None, False
        if pool is not None:
            pool.stop()  # type: ignore[no-untyped-call]
            pool.join(10)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
