"""Admin test routes answer with the text the model would see, plus the time it took.

Every executor's output passes the same redaction step here as in a chat run, so a secret an
upstream echoes back (an MCP server printing its env, an API reflecting a key) never returns.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable

from app.kit.schemas import ToolCallResult
from app.security.redact import redact_text
from app.tools.base import ToolResult


async def timed_tool_call(call: Awaitable[ToolResult]) -> ToolCallResult:
    start = time.perf_counter()
    result = await call
    return ToolCallResult(
        ok=result.ok,
        output=redact_text(result.output) if result.ok else "",
        error=None if result.ok else redact_text(result.error or "error"),
        elapsed_ms=round((time.perf_counter() - start) * 1000, 2),
    )
