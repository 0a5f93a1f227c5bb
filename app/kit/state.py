"""Narrow route dependencies on the long-lived objects of the app lifespan.

`app/runtime.py` builds those objects once and the app factory keeps them on `app.state.runtime`.
A router never imports the runtime (it sits above every domain): it declares the one part it
needs, typed with that part's own class, e.g.
`McpPoolDep = Annotated[McpPool, Depends(runtime_part("mcp"))]`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request

from app.config import Settings


def runtime_part(name: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency returning the attribute `name` of the app's runtime.

    Async although it does not wait: FastAPI runs a plain `def` dependency in a worker
    thread, a hop per request for a lookup."""

    async def dependency(request: Request) -> Any:
        return getattr(request.app.state.runtime, name)

    dependency.__name__ = f"runtime_{name}"
    return dependency


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]
