"""The worker processes every conversion runs in: never on the event loop (a thread would not
do: parsing in Python holds the GIL), each call bounded in time and memory.

A call past its time is stopped by killing its worker (pebble replaces it), so a hostile page
or document costs at most `QUIVER_CONVERT_TIMEOUT_S` of one worker and never stalls the
process. Workers are started with `spawn` on first use (nothing of the parent's event loop,
threads or connections is inherited) and limited to `QUIVER_CONVERT_MEMORY_MB` of address
space, so a decompression bomb ends in a `MemoryError` (a clear 422), not in the OOM killer.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar, cast

import pebble
from pebble import ProcessExpired

from app.convert.html import Page, html_to_page
from app.errors import Invalid

T = TypeVar("T")


def _limit_memory(max_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))


class ConversionPool:
    def __init__(self, *, workers: int, timeout_s: float, memory_bytes: int) -> None:
        self.timeout_s = timeout_s
        self._workers = workers
        self._memory_bytes = memory_bytes
        self._pool: pebble.ProcessPool | None = None

    def _started(self) -> pebble.ProcessPool:
        if self._pool is None:
            self._pool = pebble.ProcessPool(
                max_workers=self._workers,
                initializer=_limit_memory,
                initargs=(self._memory_bytes,),
                context=multiprocessing.get_context("spawn"),
            )
        return self._pool

    async def run(
        self, fn: Callable[..., T], *args: Any, what: str, timeout_s: float | None = None
    ) -> T:
        """`fn(*args)` in a worker. `Invalid` names `what` when it fails, runs out of time or
        memory; cancelling the caller stops the worker."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        future = self._started().schedule(fn, args=args, timeout=limit)
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
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()  # type: ignore[no-untyped-call]
            pool.join(10)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
