"""Built-in tools: `http_fetch` (through the egress guard) and `recall_knowledge` (§6.4)."""

from __future__ import annotations

from typing import Any

from app.errors import Invalid
from app.pipeline.sources.backends import Backends
from app.security.egress import EgressGuard, FetchError, guarded_request
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset

HTTP_FETCH = "http_fetch"
RECALL_KNOWLEDGE = "recall_knowledge"
DEFAULT_FETCH_CHARS = 20_000
MAX_FETCH_CHARS = 100_000
DEFAULT_RECALL_LIMIT = 5
MAX_RECALL_LIMIT = 50
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "+json", "+xml")

HTTP_FETCH_TOOL = ToolDef(
    name=HTTP_FETCH,
    description="Fetch a public http(s) URL as text (HTML reduced to readable text).",
    parameters={
        "type": "object",
        "properties": {"url": {"type": "string"}, "max_chars": {"type": "integer"}},
        "required": ["url"],
    },
    kind="builtin",
    target="http_fetch",
)

RECALL_KNOWLEDGE_TOOL = ToolDef(
    name=RECALL_KNOWLEDGE,
    description=(
        "Search coding conventions. scope=conventions with a directory: query is the language."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "directory": {"type": "string"},
            "scope": {"type": "string", "enum": ["conventions"]},
        },
    },
    kind="builtin",
    target="recall_knowledge",
)


def _clamp(value: Any, default: int, low: int, high: int) -> int:
    """Schemas stay small for the model; bounds are enforced here instead."""
    return default if value is None else max(low, min(high, int(value)))


def _is_text(content_type: str) -> bool:
    lowered = content_type.lower()
    return not lowered or any(marker in lowered for marker in _TEXT_TYPES)


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n…[truncated: showing {max_chars}/{len(text)} characters]"


class HttpFetch:
    def __init__(self, backends: Backends) -> None:
        self._backends = backends
        self._guard = EgressGuard(backends.settings)

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        settings = self._backends.settings
        url = str(args["url"])
        max_chars = _clamp(args.get("max_chars"), DEFAULT_FETCH_CHARS, 100, MAX_FETCH_CHARS)
        try:
            response = await guarded_request(
                self._backends.http,
                self._guard,
                "GET",
                url,
                timeout=settings.http_timeout_s,
                max_bytes=settings.http_max_response_bytes,
            )
        except FetchError as exc:
            return ToolResult.fail(str(exc), retryable=exc.retryable)
        content_type = response.headers.get("content-type", "")
        if not _is_text(content_type):
            body = f"[binary content: {content_type}, {len(response.body)} bytes not shown]"
        elif "html" in content_type.lower():
            if self._backends.converter is None:
                return ToolResult.fail("http_fetch: HTML pages cannot be read in this process")
            try:  # in a worker process, bounded in time: a hostile page never stalls the loop
                page = await self._backends.converter.page(response.text())
            except Invalid as exc:
                return ToolResult.fail(f"{response.final_url}: {exc.message}")
            body = f"Title: {page.title}\n\n{page.text}" if page.title else page.text
        else:
            body = response.text()
        if response.truncated:
            body += "\n…[response cut at the size limit]"
        status = response.status_code
        if status >= 400:
            retryable = status == 429 or status >= 500
            return ToolResult.fail(
                f"HTTP {status} from {response.final_url}: {_cut(body, 500)}", retryable=retryable
            )
        return ToolResult.success(f"URL: {response.final_url}\n\n{_cut(body, max_chars)}")


class RecallKnowledge:
    def __init__(self, backends: Backends) -> None:
        self._backends = backends

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return await self._backends.conventions.recall(
            query=str(args.get("query") or ""),
            limit=_clamp(args.get("limit"), DEFAULT_RECALL_LIMIT, 1, MAX_RECALL_LIMIT),
            directory=args.get("directory") or None,
            scope=args.get("scope") or None,
        )


def builtin_toolset(backends: Backends) -> FunctionToolset:
    """Step 1 of the pipeline: the tools every agent has (before the category filter)."""
    return FunctionToolset(
        [
            FunctionTool(tool=HTTP_FETCH_TOOL, handler=HttpFetch(backends)),
            FunctionTool(tool=RECALL_KNOWLEDGE_TOOL, handler=RecallKnowledge(backends)),
        ],
        label="builtins",
    )
