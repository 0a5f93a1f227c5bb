"""OpenAI-compatible Chat Completions over httpx: streamed, native tool calls (docs/contract.md §5).

Contract the ReAct loop relies on:
- `stream_chat()` yields `TextDelta` items as text arrives, then exactly one `Completion`
  whose message carries the assembled (possibly parallel) tool calls and the usage.
- Failures raise `LlmError` with a stable `code`; messages never contain the API key.
- Retries (429, 408, 409, 5xx, connect errors, timeouts, a stream cut short) happen only while
  nothing has been yielded yet. Once a delta reached the caller, a failure is raised, never
  retried, so the caller never sees text twice.
- `timeout_s` bounds each HTTP attempt from connect to the last byte.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from app.llm.errors import ERROR_SNIPPET_CHARS, LlmError, error_detail, retry_after
from app.llm.stream import ChunkError, SseDecoder, StreamAssembler, completion_from_json
from app.llm.types import ChatMessage, Completion, TextDelta

if TYPE_CHECKING:
    from app.config import Settings

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_RETRY_STATUSES = frozenset({408, 409, 429})

__all__ = ["LlmClient", "LlmError"]


class LlmClient:
    """One configured endpoint + model; safe to share across concurrent runs."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float,
        max_retries: int,
        http: httpx.AsyncClient | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        retry_after_max_s: float = 20.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.retry_after_max_s = retry_after_max_s
        """A Retry-After longer than this is not waited for: the error is raised at once."""
        self._api_key = api_key or None
        self._owns_http = http is None
        self._http = http
        """Created on first use when not given: building an httpx client costs ~0.1 s (TLS)."""
        self._url = f"{self.base_url}/chat/completions"
        self._endpoint = _describe(self._url)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        http: httpx.AsyncClient | None = None,
        model_override: str | None = None,
    ) -> LlmClient:
        """Build from `QUIVER_LLM_*`; `model_override` is an agent's own model name."""
        if not settings.llm_base_url:
            raise LlmError("llm_not_configured", "no LLM endpoint: set QUIVER_LLM_BASE_URL")
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return cls(
            base_url=settings.llm_base_url,
            api_key=key,
            model=model_override or settings.llm_model,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            http=http,
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this instance created it."""
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> LlmClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def build_body(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[dict[str, Any]] | None,
        model: str | None = None,
        temperature: float | None = None,
        stream: bool = True,
    ) -> dict[str, Any]:
        """The request body; bare `{name, description, parameters}` tools are wrapped."""
        body: dict[str, Any] = {
            "model": model or self.model,
            "messages": [m.to_openai() for m in messages],
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [_as_tool(tool) for tool in tools]
            body["tool_choice"] = "auto"
        if temperature is not None:
            body["temperature"] = temperature
        return body

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[dict[str, Any]] | None,
        model: str | None = None,
        temperature: float | None = None,
    ) -> AsyncGenerator[TextDelta | Completion, None]:
        """Stream one model call: `TextDelta`* then exactly one `Completion`.

        `tools` are OpenAI tool dicts (`{"type": "function", "function": {...}}`; bare function
        dicts are wrapped); `tool_choice` is "auto" when any are given. `model` overrides the
        client's model for this call. Raises `LlmError`; a failure after the first yielded
        item is raised, never retried. Close the generator (`aclose()`) if you stop early.
        """
        body = self.build_body(messages, tools=tools, model=model, temperature=temperature)
        attempt = 0
        while True:
            yielded = False
            try:
                async with aclosing(self._attempt(body)) as items:
                    async for item in items:
                        yielded = True
                        yield item
                return
            except LlmError as exc:
                delay = None if yielded else self._retry_delay(exc, attempt)
                if delay is None:
                    raise
                attempt += 1
                logger.warning(
                    "LLM call failed (%s); retry %d/%d in %.2fs",
                    exc.code,
                    attempt,
                    self.max_retries,
                    delay,
                )
                await asyncio.sleep(delay)

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[dict[str, Any]] | None,
        model: str | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Run one model call to the end and return its `Completion` (deltas discarded)."""
        stream = self.stream_chat(messages, tools=tools, model=model, temperature=temperature)
        async with aclosing(stream) as items:
            async for item in items:
                if isinstance(item, Completion):
                    return item
        raise LlmError("llm_bad_response", "stream ended without a completion")

    def _retry_delay(self, exc: LlmError, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None to give up."""
        if not exc.retryable or attempt >= self.max_retries:
            return None
        if exc.retry_after_s is not None:
            return exc.retry_after_s if exc.retry_after_s <= self.retry_after_max_s else None
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _attempt(self, body: dict[str, Any]) -> AsyncGenerator[TextDelta | Completion, None]:
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        http = self._client()
        request = http.build_request(
            "POST",
            self._url,
            json=body,
            headers=self._headers(),
            timeout=httpx.Timeout(self.timeout_s),
        )
        async with _IoGuard(self, "waiting for the response"), asyncio.timeout_at(deadline):
            response = await http.send(request, stream=True)
        try:
            if response.status_code >= 400:
                async with _IoGuard(self, "reading the response"), asyncio.timeout_at(deadline):
                    await response.aread()
                raise self._status_error(response)
            content_type = response.headers.get("content-type", "")
            if content_type.startswith("text/html"):
                raise LlmError(
                    "llm_bad_response",
                    f"the model endpoint {self._endpoint} answered with an HTML page, "
                    "not a chat completion (check QUIVER_LLM_BASE_URL)",
                )
            if content_type.startswith("application/json"):
                async with _IoGuard(self, "reading the response"), asyncio.timeout_at(deadline):
                    await response.aread()
                completion = self._parse(lambda: completion_from_json(response.json()))
                if completion.message.content:
                    yield TextDelta(completion.message.content)
                yield completion
                return
            async for item in self._read_sse(response, deadline):
                yield item
        finally:
            await response.aclose()

    async def _read_sse(
        self, response: httpx.Response, deadline: float
    ) -> AsyncGenerator[TextDelta | Completion, None]:
        assembler = StreamAssembler()
        decoder = SseDecoder()
        chunks = response.aiter_text()
        done = ended = False
        while not ended:
            try:
                # One deadline per network read (not per line); never spans a yield.
                async with _IoGuard(self, "reading the stream"), asyncio.timeout_at(deadline):
                    events = decoder.feed(await anext(chunks))
            except StopAsyncIteration:
                events, ended = decoder.flush(), True
            # After [DONE] keep reading to the end of the body: an unfinished body makes
            # httpx drop the connection instead of returning it to the pool.
            for data in [] if done else events:
                if data.strip() == "[DONE]":
                    done = True
                    break
                text = self._feed(assembler, data)
                if text:
                    yield TextDelta(text)
        if not done and assembler.finish_reason is None:
            raise LlmError(
                "llm_unavailable",
                "the model stream ended before the response was complete",
                retryable=True,
            )
        yield self._parse(assembler.finish)

    def _feed(self, assembler: StreamAssembler, data: str) -> str:
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise LlmError("llm_bad_response", f"undecodable stream chunk: {exc}") from None
        return self._parse(lambda: assembler.feed(chunk))

    def _parse(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except ChunkError as exc:
            code = "llm_upstream_error" if exc.upstream else "llm_bad_response"
            raise LlmError(code, self.redact(str(exc))) from None
        except ValueError as exc:  # the body was not JSON at all
            raise LlmError("llm_bad_response", f"undecodable response: {exc}") from None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient()
        return self._http

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _status_error(self, response: httpx.Response) -> LlmError:
        status = response.status_code
        detail = self.redact(error_detail(response))[:ERROR_SNIPPET_CHARS]
        retryable = status in _RETRY_STATUSES or status >= 500
        return LlmError(
            f"llm_http_{status}",
            f"the model endpoint answered HTTP {status}" + (f": {detail}" if detail else ""),
            status_code=status,
            retryable=retryable,
            retry_after_s=retry_after(response.headers) if retryable else None,
        )

    def redact(self, text: str) -> str:
        """Remove the API key from provider text (redact before truncating)."""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text


class _IoGuard:
    """Translate transport failures and timeouts inside one I/O step into `LlmError`."""

    def __init__(self, client: LlmClient, phase: str) -> None:
        self.client = client
        self.phase = phase

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None:
            return False
        endpoint = self.client._endpoint
        if isinstance(exc, TimeoutError | httpx.TimeoutException):
            raise LlmError(
                "llm_timeout",
                f"no answer from the model endpoint {endpoint} within "
                f"{self.client.timeout_s:g}s ({self.phase})",
                retryable=True,
            ) from None
        if isinstance(exc, httpx.TransportError):
            what = "cannot reach" if exc_type is httpx.ConnectError else "lost the connection to"
            raise LlmError(
                "llm_unavailable",
                f"{what} the model endpoint {endpoint} ({type(exc).__name__})",
                retryable=True,
            ) from None
        return False


def _as_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if tool.get("type") == "function" and "function" in tool:
        return tool
    return {"type": "function", "function": tool}


def _describe(url: str) -> str:
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.host}{port}"
