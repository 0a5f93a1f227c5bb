"""A live `quiver serve`'s traces reach a real OTLP/HTTP receiver, named as GenAI conventions say.

The receiver is an HTTP server on 127.0.0.1 that decodes the exporter's protobuf bodies
(`ExportTraceServiceRequest`), the way a collector does. A chat that delegates to a second agent
produces: the request's own trace (joined through `traceparent`), `invoke_agent` per run, `chat`
per model call with the models and token usage, `execute_tool` per tool call, and the delegated
run's `invoke_agent` under the `call_agent` tool span.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.served import ADMIN_TOKEN, INITIALIZE, Served, clean_env, quiver_serve
from tests.fixtures.threaded_server import ThreadedServer

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"
ANSWER = "The deploy finished at noon; nothing else changed."
SECRET = "tok_live_7f3c9a1b2d4e6f80"


class OtlpReceiver:
    """Collects the spans of every `POST /v1/traces` (OTLP/HTTP, protobuf)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._http = ThreadedServer("otlp")
        self.url = ""

    async def _traces(self, request: Request) -> Response:
        body = ExportTraceServiceRequest()
        body.ParseFromString(await request.body())
        with self._lock:
            for resource in body.resource_spans:
                service = {a.key: a.value.string_value for a in resource.resource.attributes}
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(_span(span, service))
        return Response(status_code=200, media_type="application/x-protobuf")

    def start(self) -> None:
        self._http.start(Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])]))
        self.url = f"http://127.0.0.1:{self._http.port}"

    def stop(self) -> None:
        self._http.stop()

    def wait_for(self, name: str, count: int = 1, timeout_s: float = 15.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                found = [s for s in self.spans if s["name"] == name]
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{count} span(s) {name!r} not received: {self.names()}")

    def names(self) -> list[str]:
        with self._lock:
            return [s["name"] for s in self.spans]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _span(span: Any, service: dict[str, str]) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "attributes": {a.key: _value(a.value) for a in span.attributes},
        "status": span.status.code,
        "service": service.get("service.name"),
    }


def _ancestors(spans: list[dict[str, Any]], span: dict[str, Any]) -> list[str]:
    by_id = {s["span_id"]: s for s in spans}
    found, parent = [], span["parent_span_id"]
    while parent in by_id:
        found.append(parent)
        parent = by_id[parent]["parent_span_id"]
    return found


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    found = OtlpReceiver()
    found.start()
    try:
        yield found
    finally:
        found.stop()


def _serve(tmp_path: Path, llm: ScriptedLLM, endpoint: str, **extra: str) -> Any:
    env = clean_env(
        QUIVER_DATABASE_URL=f"sqlite:///{tmp_path / 'quiver.db'}",
        QUIVER_DATA_DIR=str(tmp_path),
        QUIVER_LLM_BASE_URL=llm.base_url,
        QUIVER_LLM_MODEL="gpt-4o-mini",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_SERVICE_NAME="quiver-test",
        **extra,
    )
    return quiver_serve([sys.executable, "-m", "app.cli", "serve"], env=env, cwd=tmp_path)


def _delegating_chat(served: Served, llm: ScriptedLLM, message: str) -> str:
    """Agent `lead` delegates to `helper` with `call_agent`; returns the SSE text."""
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    api = f"{served.base_url}/api/v1"
    with httpx.Client(headers=auth, timeout=30) as http:
        connector = {
            "name": "billing",
            "base_url": "https://billing.example.com",
            "auth_type": "bearer",
            "credentials": {"token": SECRET},
            "actions": [
                {
                    "name": "get_invoice",
                    "method": "GET",
                    "path": "/invoices/{id}",
                    "description": "Fetch an invoice",
                    "parameters": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}},
                        "required": ["id"],
                    },
                }
            ],
        }
        http.post(f"{api}/connectors", json=connector).raise_for_status()
        helper = http.post(f"{api}/agents", json={"name": "helper", "instructions": "Help."})
        helper.raise_for_status()
        lead = http.post(
            f"{api}/agents",
            json={"name": "lead", "instructions": "Lead.", "delegate_ids": [helper.json()["id"]]},
        )
        lead.raise_for_status()
        llm.script(
            Turn(tool_calls=[("call_d1", "call_agent", {"agent": "helper", "task": "check"})]),
            Turn(text="helper says fine", model="gpt-4o-mini-2024-07-18", usage=(21, 4)),
            Turn(text=ANSWER, model="gpt-4o-mini-2024-07-18", usage=(55, 11)),
        )
        traceparent = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
        with http.stream(
            "POST",
            f"{api}/chat",
            json={"agent_id": lead.json()["id"], "message": message},
            headers={"traceparent": traceparent},
        ) as response:
            response.raise_for_status()
            return "".join(response.iter_text())


@pytest.mark.timeout(120)
def test_a_delegating_run_is_traced_as_the_genai_conventions_name_it(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    with ScriptedLLM() as llm, _serve(tmp_path, llm, receiver.url) as served:
        stream = _delegating_chat(served, llm, f"Did the deploy finish? key {SECRET}")
        assert "event: run_finished" in stream
        runs = receiver.wait_for("invoke_agent lead") + receiver.wait_for("invoke_agent helper")
        chats = receiver.wait_for("chat gpt-4o-mini", count=3)
        [tool] = receiver.wait_for("execute_tool call_agent")
    lead, helper = runs
    [request] = receiver.wait_for("POST /api/v1/chat")
    assert request["parent_span_id"] == PARENT_SPAN_ID, "joined to the caller's traceparent"
    assert lead["trace_id"] == TRACE_ID
    assert request["span_id"] in _ancestors(receiver.spans, lead), "the run nests in the request"
    assert lead["service"] == "quiver-test"
    assert lead["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert lead["attributes"]["quiver.run.status"] == "completed"
    assert tool["parent_span_id"] == lead["span_id"]
    assert tool["attributes"]["gen_ai.tool.call.id"] == "call_d1"
    assert tool["attributes"]["quiver.tool.kind"] == "agent"
    assert helper["parent_span_id"] == tool["span_id"], "the delegated run nests in the call"
    assert helper["trace_id"] == TRACE_ID
    assert {c["parent_span_id"] for c in chats} == {lead["span_id"], helper["span_id"]}
    final = next(c for c in chats if c["attributes"].get("gen_ai.usage.input_tokens") == 55)
    assert final["attributes"]["gen_ai.request.model"] == "gpt-4o-mini"
    assert final["attributes"]["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert final["attributes"]["gen_ai.usage.output_tokens"] == 11
    assert final["parent_span_id"] == lead["span_id"]
    assert not receiver.wait_for("GET /readyz", count=0), "health probes make no trace"
    dump = repr(receiver.spans)
    assert ANSWER not in dump, "no message text unless capture is turned on"
    assert "deploy" not in dump
    assert SECRET not in dump


@pytest.mark.timeout(120)
def test_captured_content_is_redacted(tmp_path: Path, receiver: OtlpReceiver) -> None:
    capture = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    with ScriptedLLM() as llm, _serve(tmp_path, llm, receiver.url, **capture) as served:
        _delegating_chat(served, llm, f"Did the deploy finish? key {SECRET}")
        receiver.wait_for("chat gpt-4o-mini", count=3)
        receiver.wait_for("execute_tool call_agent")
    dump = repr(receiver.spans)
    assert ANSWER in dump, "the model's answer is captured when asked"
    assert "Did the deploy finish?" in dump
    assert SECRET not in dump, "but never a stored secret"


@pytest.mark.timeout(120)
def test_traces_exporter_none_turns_tracing_off(tmp_path: Path, receiver: OtlpReceiver) -> None:
    """`OTEL_TRACES_EXPORTER=none` wins over an endpoint, as in the SDK: nothing is sent."""
    off = {"OTEL_TRACES_EXPORTER": "none"}
    with ScriptedLLM() as llm, _serve(tmp_path, llm, receiver.url, **off) as served:
        stream = _delegating_chat(served, llm, "Did the deploy finish?")
        assert "event: run_finished" in stream
        time.sleep(0.5)
    assert receiver.spans == []


def _list_tools_at_the_endpoint(served: Served) -> str:
    """`initialize`, then `tools/list` on agent `plain`'s MCP endpoint; the listing's text."""
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(headers=auth, timeout=30) as http:
        made = http.post(f"{served.base_url}/api/v1/agents", json={"name": "plain"})
        made.raise_for_status()
        url = f"{served.base_url}/mcp/agents/plain"
        headers = {"Accept": "application/json, text/event-stream"}
        opened = http.post(url, json=INITIALIZE, headers=headers)
        opened.raise_for_status()
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        listed = http.post(url, json=listing, headers=headers)
        listed.raise_for_status()
        return listed.text


@pytest.mark.timeout(120)
def test_the_mcp_sdk_span_of_an_endpoint_request_is_kept_with_tracing_on(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    """The endpoint drops the SDK's span per request only while tracing is off (then it
    records nothing: tests/mcpserver/test_answers.py); with tracing on it stays."""
    with ScriptedLLM() as llm, _serve(tmp_path, llm, receiver.url) as served:
        assert '"tools"' in _list_tools_at_the_endpoint(served)
        (span,) = receiver.wait_for("tools/list")
    assert span["attributes"]["mcp.method.name"] == "tools/list"
