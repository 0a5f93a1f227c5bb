"""Admin test routes answer with the text the model would see, plus the time it took."""

from __future__ import annotations

import time
from collections.abc import Awaitable

from app.kit.schemas import ToolCallResult
from app.tools.base import ToolResult


async def timed_tool_call(call: Awaitable[ToolResult]) -> ToolCallResult:
    start = time.perf_counter()
    result = await call
    return ToolCallResult(
        ok=result.ok,
        output=result.output if result.ok else "",
        error=None if result.ok else result.error,
        elapsed_ms=round((time.perf_counter() - start) * 1000, 2),
    )
