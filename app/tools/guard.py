"""`safe_call`: no stray exception from a tool source ever reaches the loop.

See docs/architecture.md, rule "failures are results".
"""

from __future__ import annotations

import logging
import re
from typing import Any

from app.tools.base import CallContext, ToolResult, Toolset

logger = logging.getLogger(__name__)

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@]+@")
_MAX_DETAIL = 300


def scrub(text: str) -> str:
    """Drop URL credentials (`scheme://user:pass@host` → `scheme://***@host`) and cap the length."""
    cleaned = _USERINFO.sub(r"\g<scheme>***@", text)
    return cleaned if len(cleaned) <= _MAX_DETAIL else cleaned[: _MAX_DETAIL - 3] + "..."


def error_result(name: str, exc: BaseException) -> ToolResult:
    """A typed failure for an unexpected exception, safe to show to the model."""
    retryable = isinstance(exc, TimeoutError | ConnectionError)
    detail = scrub(str(exc)) or "no detail"
    return ToolResult.fail(
        f"Tool {name!r} failed unexpectedly ({type(exc).__name__}): {detail}",
        retryable=retryable,
    )


async def safe_call(
    toolset: Toolset, name: str, args: dict[str, Any], ctx: CallContext
) -> ToolResult:
    """Call `name` on `toolset`; any exception (not cancellation) becomes `ToolResult.fail`."""
    try:
        return await toolset.call_tool(name, args, ctx)
    except Exception as exc:
        logger.warning("tool %r raised %s", name, type(exc).__name__, exc_info=True)
        return error_result(name, exc)
