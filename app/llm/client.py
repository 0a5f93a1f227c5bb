"""OpenAI-compatible Chat Completions on aiohttp: streamed, native tool calls (docs/contract.md §5).

Contract the ReAct loop relies on:
- `stream_chat()` yields `TextDelta` items as text arrives, then exactly one `Completion`
  whose message carries the assembled (possibly parallel) tool calls and the usage.
- Failures raise `LlmError` with a stable `code`; messages never contain the API key.
- Retries (429, 408, 409, 5xx, connect errors, timeouts, a stream cut short) happen only while
  nothing has been yielded yet. Once a delta reached the caller, a failure is raised, never
  retried, so the caller never sees text twice.
- `timeout_s` bounds each HTTP attempt from connect to the last byte: one timer per attempt
  (`_Deadline`), not a timeout scope per network read.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import aiohttp

from app.llm.errors import ERROR_SNIPPET_CHARS, LlmError, error_detail, retry_after
from app.llm.stream import ChunkError, SseDecoder, StreamAssembler, completion_from_json
from app.llm.transport import NETWORK_ERRORS, model_session, network_failure, request_body
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
        session: aiohttp.ClientSession | None = None,
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
        self._owns_session = session is None
        self._session = session
        """Created on first use when not given (inside the running loop, as aiohttp asks)."""
        self._url = f"{self.base_url}/chat/completions"
        self._endpoint = _describe(self._url)
        # Built once: every call sends the same headers.
        self._headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if self._api_key:
            self._headers["Authorization"] = f"Bearer {self._api_key}"

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        session: aiohttp.ClientSession | None = None,
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
            session=session,
        )

    async def aclose(self) -> None:
        """Close the HTTP session if this instance created it."""
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

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
        session = self._client()
        deadline = _Deadline(self.timeout_s)
        phase = "waiting for the response"
        try:
            response = await deadline.io(
                session.post(
                    self._url,
                    data=request_body(_encode(body)),
                    headers=self._headers,
                    allow_redirects=False,
                )
            )
            try:
                phase = "reading the response"
                if response.status >= 400:
                    raise self._status_error(response, await deadline.io(response.read()))
                content_type = response.headers.get("Content-Type", "")
                if content_type.startswith("text/html"):
                    raise LlmError(
                        "llm_bad_response",
                        f"the model endpoint {self._endpoint} answered with an HTML page, "
                        "not a chat completion (check QUIVER_LLM_BASE_URL)",
                    )
                if content_type.startswith("application/json"):
                    raw = await deadline.io(response.read())
                    completion = self._parse(lambda: completion_from_json(json.loads(raw)))
                    if completion.message.content:
                        yield TextDelta(completion.message.content)
                    yield completion
                    return
                phase = "reading the stream"
                async for item in self._read_sse(response, deadline):
                    yield item
            finally:
                # A body read to its end gives its connection back; an unfinished one closes it.
                response.release()
        except NETWORK_ERRORS as exc:
            raise self._network_error(exc, phase) from None
        finally:
            deadline.disarm()

    async def _read_sse(
        self, response: aiohttp.ClientResponse, deadline: _Deadline
    ) -> AsyncGenerator[TextDelta | Completion, None]:
        assembler = StreamAssembler()
        decoder = SseDecoder()
        decode = _text_decoder(response.charset)
        read = response.content.readany
        done = ended = False
        while not ended:
            # The call's one deadline interrupts this read (never a yield: see `_Deadline`).
            chunk = await deadline.io(read())
            if chunk:
                events = decoder.feed(decode(chunk, False))
            else:  # the end of the body
                events, ended = decoder.feed(decode(b"", True)) + decoder.flush(), True
            # After [DONE] keep reading to the end of the body: an unfinished body closes the
            # connection instead of returning it for the next call.
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

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            # Its own connections (tool traffic has others): one per concurrent call, kept for
            # the next one (`app/llm/transport.py`).
            self._session = model_session()
        return self._session

    def _network_error(self, exc: BaseException, phase: str) -> LlmError:
        kind, name = network_failure(exc)
        if kind == "timeout":
            return LlmError(
                "llm_timeout",
                f"no answer from the model endpoint {self._endpoint} within "
                f"{self.timeout_s:g}s ({phase})",
                retryable=True,
            )
        what = "cannot reach" if kind == "connect" else "lost the connection to"
        return LlmError(
            "llm_unavailable",
            f"{what} the model endpoint {self._endpoint} ({name})",
            retryable=True,
        )

    def _status_error(self, response: aiohttp.ClientResponse, body: bytes) -> LlmError:
        status = response.status
        detail = self.redact(error_detail(body))[:ERROR_SNIPPET_CHARS]
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


class _Deadline:
    """One deadline per HTTP attempt: a single timer instead of a timeout scope per read.

    `io(aw)` awaits one network step. When the timer fires during such a step, the task is
    cancelled and the step raises `TimeoutError`; when it fires between steps (the caller
    holds a yielded delta), the next step raises at once. A cancellation from anywhere else
    (the run's cancel watcher, shutdown) passes through unchanged.
    """

    __slots__ = ("_fired", "_handle", "_waiting", "expired")

    def __init__(self, timeout_s: float) -> None:
        self.expired = False
        self._fired = False
        self._waiting: asyncio.Task[Any] | None = None
        self._handle = asyncio.get_running_loop().call_later(timeout_s, self._expire)

    def _expire(self) -> None:
        self.expired = True
        if self._waiting is not None:
            self._fired = True
            self._waiting.cancel()

    def disarm(self) -> None:
        self._handle.cancel()

    async def io(self, step: Awaitable[_T]) -> _T:
        if self.expired:
            close = getattr(step, "close", None)
            if close is not None:  # a coroutine never awaited would warn
                close()
            raise TimeoutError
        task = self._waiting = asyncio.current_task()
        try:
            return await step
        except asyncio.CancelledError:
            if self._fired and task is not None and task.uncancel() == 0:
                self._fired = False
                raise TimeoutError from None
            raise
        finally:
            self._waiting = None


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _as_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if tool.get("type") == "function" and "function" in tool:
        return tool
    return {"type": "function", "function": tool}


def _text_decoder(charset: str | None) -> Callable[[bytes, bool], str]:
    """An incremental decoder of the stream's charset (UTF-8, as SSE says, when none or unknown):
    a character split between two reads is decoded once both arrived."""
    try:
        factory = codecs.getincrementaldecoder(charset or "utf-8")
    except LookupError:
        factory = codecs.getincrementaldecoder("utf-8")
    return factory(errors="replace").decode


def _describe(url: str) -> str:
    parsed = urlsplit(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.hostname}{port}"
