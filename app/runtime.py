"""Long-lived runtime objects owned by the app lifespan (HTTP client, pools, executors)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings


@dataclass(kw_only=True)
class Runtime:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient

    @classmethod
    def start(cls, settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]) -> Runtime:
        http = httpx.AsyncClient(
            timeout=settings.http_timeout_s,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )
        return cls(settings=settings, sessionmaker=sessionmaker, http=http)

    async def aclose(self) -> None:
        await self.http.aclose()
