"""OpenTelemetry traces of runs, model calls and tool calls (GenAI semantic conventions).

Off unless an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, read by `Settings`); then the OpenTelemetry SDK exports
spans over OTLP/HTTP with a batch processor, and every other standard `OTEL_*` variable
(headers, sampler, batch delays, resource attributes) is read by the SDK itself.

Spans (docs/operations.md): `invoke_agent {agent}` per run, `chat {model}` per model call,
`execute_tool {tool}` per tool call; a delegated run's span is a child of the `call_agent`
tool span of its parent. HTTP server spans come from FastAPI's own OpenTelemetry support,
which uses the provider installed here and joins an incoming `traceparent`: a run started by
a request (chat, the OpenAI-compatible route, the MCP endpoint) nests in that request's span.
No message text and no tool arguments or results are recorded unless
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, and then only redacted.

When tracing is off every helper here returns at once without touching OpenTelemetry, so the
run path pays one attribute read per span it would have made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from app.config import Settings
from app.security.redact import redact_text

_TRACER_NAME = "quiver"
ModelSpan = Span
"""A started `chat {model}` span (None from `start_model_span` when tracing is off)."""
_NULL: AbstractContextManager[None] = nullcontext()
_UNTRACED = frozenset({"/healthz", "/readyz", "/metrics"})


class _State:
    enabled = False
    capture_content = False
    provider: Any = None


_state = _State()


def configure(settings: Settings) -> None:
    """Install the SDK's tracer provider when an endpoint is configured (idempotent)."""
    _state.capture_content = settings.otel_capture_message_content
    if not settings.tracing_enabled or _state.provider is not None:
        _state.enabled = _state.provider is not None
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({SERVICE_NAME: settings.otel_service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _state.provider = provider
    _state.enabled = True


def shutdown() -> None:
    """Flush and stop the exporter (the process is stopping)."""
    if _state.provider is not None:
        _state.provider.shutdown()


def enabled() -> bool:
    return _state.enabled


def _tracer() -> trace.Tracer:
    return trace.get_tracer(_TRACER_NAME)


def untraced_path(scope: Mapping[str, Any]) -> bool:
    """Health probes and metrics scrapes make no trace (FastAPI's `telemetry.exclude`)."""
    return scope.get("path") in _UNTRACED


@contextmanager
def _current(span: Span) -> Iterator[None]:
    with trace.use_span(
        span, end_on_exit=True, record_exception=False, set_status_on_exception=False
    ):
        yield


def run_span(agent: str, run_id: str, conversation_id: str) -> AbstractContextManager[None]:
    """`invoke_agent {agent}`, current for the run's task (model and tool spans nest in it)."""
    if not _state.enabled:
        return _NULL
    span = _tracer().start_span(
        f"invoke_agent {agent}",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": conversation_id,
            "quiver.run.id": run_id,
        },
    )
    return _current(span)


def end_run(status: str, error_code: str | None = None) -> None:
    """Record the run's outcome on the current `invoke_agent` span."""
    if not _state.enabled:
        return
    span = trace.get_current_span()
    span.set_attribute("quiver.run.status", status)
    if error_code is not None:
        span.set_attribute("error.type", error_code)
        span.set_status(Status(StatusCode.ERROR, error_code))


def start_model_span(
    model: str, messages: Callable[[], list[dict[str, Any]]] | None = None
) -> ModelSpan | None:
    """`chat {model}`: a child of the current run span; ended by `end_model_span`. `messages`
    is called only when content capture is on."""
    if not _state.enabled:
        return None
    span = _tracer().start_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model},
    )
    if _state.capture_content and messages is not None:
        span.set_attribute("gen_ai.input.messages", _redacted_json(messages()))
    return span


def end_model_span(
    span: ModelSpan | None,
    *,
    response_model: str | None,
    input_tokens: int,
    output_tokens: int,
    finish_reason: str | None,
    output: dict[str, Any] | None = None,
    error: BaseException | None = None,
) -> None:
    if span is None:
        return
    if response_model:
        span.set_attribute("gen_ai.response.model", response_model)
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
    if _state.capture_content and output is not None:
        span.set_attribute("gen_ai.output.messages", _redacted_json([output]))
    if error is not None:
        span.set_attribute("error.type", type(error).__name__)
        span.set_status(Status(StatusCode.ERROR, redact_text(str(error))[:200]))
    span.end()


def tool_span(
    name: str, call_id: str, *, kind: str, source: str | None, arguments: object = None
) -> AbstractContextManager[None]:
    """`execute_tool {tool}`, current while the call runs (a delegated run nests in it)."""
    if not _state.enabled:
        return _NULL
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "quiver.tool.kind": kind,
    }
    if source:
        attributes["quiver.tool.source"] = source
    if _state.capture_content and arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _redacted_json(arguments)
    return _current(_tracer().start_span(f"execute_tool {name}", attributes=attributes))


def end_tool(ok: bool, error: str | None, output: str | None = None) -> None:
    """Record a tool call's outcome on the current `execute_tool` span."""
    if not _state.enabled:
        return
    span = trace.get_current_span()
    if _state.capture_content and output is not None:
        span.set_attribute("gen_ai.tool.call.result", redact_text(output))
    if not ok:
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR, redact_text(error or "failed")[:200]))


def _redacted_json(value: object) -> str:
    return redact_text(json.dumps(value, ensure_ascii=False, default=str))
