"""Route dependencies of the top layer (the console): the whole runtime.

Lower layers never import this module: a router in a domain or in `chat/` declares only the
runtime part it needs through `app/kit/state.py:runtime_part`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:  # async: no worker-thread hop
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
