"""Run rate limits per API key, counted in the database so they hold across workers."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import utcnow
from app.errors import RateLimited
from app.tenancy.principal import Principal
from app.tenancy.repository import RunStartRepository

WINDOW = timedelta(minutes=1)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def count_run_start(session: AsyncSession, principal: Principal) -> None:
    """Record one run start for the key, or raise 429 when the last minute is full.

    Runs in the transaction that creates the run: the key's row lock makes concurrent
    starts on any worker wait for each other, so the count is exact. Keys without a
    limit record nothing.
    """
    limit = principal.rate_limit_per_minute
    if limit is None:
        return
    repo = RunStartRepository(session)
    await repo.lock_key(principal.key_id)
    now = utcnow()
    await repo.prune(principal.key_id, now - WINDOW * 2)
    count, oldest = await repo.since(principal.key_id, now - WINDOW)
    if count >= limit:
        wait = WINDOW.total_seconds()
        if oldest is not None:
            wait = (_aware(oldest) + WINDOW - now).total_seconds()
        raise RateLimited(
            f"this API key may start {limit} run(s) per minute; retry later",
            retry_after=max(1, math.ceil(wait)),
        )
    await repo.add(principal.key_id, now)
