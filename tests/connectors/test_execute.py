"""Connector execution against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.connectors.execute import ConnectorExecutor
from app.tools.base import CallContext, ToolResult
from tests.connectors.conftest import make_action, make_connector
from tests.connectors.server_app import LocalServer

CTX = CallContext(run_id="run-1")
TOKEN = "tok_live_5up3rS3cr3t"


def seen(result: ToolResult) -> dict[str, Any]:
    """The echo server's view of the request (the JSON after the status line)."""
    assert result.ok, result.error
    status, _, body = result.output.partition("\n")
    assert status == "HTTP 200 OK"
    data: dict[str, Any] = json.loads(body)
    return data


# --- auth (asserted on what the server recorded, not on the redacted echo) -------------


async def test_bearer_token_arrives_with_default_prefix(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn = make_connector(server.url, auth_type="bearer", credentials={"token": TOKEN})
    result = await executor.execute(conn, make_action(), {}, CTX)
    assert server.last["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert seen(result)["headers"]["authorization"] == "Bearer ***"


async def test_bearer_token_prefix_is_configurable(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn = make_connector(
        server.url,
        auth_type="bearer",
        auth_config={"token_prefix": "Token"},
        credentials={"token": TOKEN},
    )
    await executor.execute(conn, make_action(), {}, CTX)
    assert server.last["headers"]["authorization"] == f"Token {TOKEN}"


async def test_api_key_header_defaults_to_x_api_key(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn = make_connector(server.url, auth_type="api_key", credentials={"api_key": TOKEN})
    await executor.execute(conn, make_action(), {}, CTX)
    assert server.last["headers"]["x-api-key"] == TOKEN


async def test_api_key_in_a_named_header(executor: ConnectorExecutor, server: LocalServer) -> None:
    conn = make_connector(
        server.url,
        auth_type="api_key",
        auth_config={"header_name": "X-Custom-Key"},
        credentials={"api_key": TOKEN},
    )
    await executor.execute(conn, make_action(), {}, CTX)
    assert server.last["headers"]["x-custom-key"] == TOKEN
    assert "x-api-key" not in server.last["headers"]


async def test_api_key_in_the_query(executor: ConnectorExecutor, server: LocalServer) -> None:
    conn = make_connector(
        server.url,
        auth_type="api_key",
        auth_config={"query_param": "key"},
        credentials={"api_key": TOKEN},
    )
    result = await executor.execute(conn, make_action(), {}, CTX)
    assert server.last["query"] == [["key", TOKEN]]
    assert "x-api-key" not in server.last["headers"]
    assert seen(result)["query"] == [["key", "***"]]


async def test_basic_auth_arrives_decodable(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn = make_connector(
        server.url, auth_type="basic", credentials={"username": "ada", "password": "pa:ss w0rd"}
    )
    await executor.execute(conn, make_action(), {}, CTX)
    scheme, _, encoded = server.last["headers"]["authorization"].partition(" ")
    assert (scheme, base64.b64decode(encoded).decode()) == ("Basic", "ada:pa:ss w0rd")


async def test_missing_credentials_is_a_clear_error(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn = make_connector(server.url, auth_type="bearer", credentials=None)
    result = await executor.execute(conn, make_action(), {}, CTX)
    assert not result.ok
    assert result.error == "Connector 'svc' uses 'bearer' auth but its credentials have no 'token'"


async def test_no_secret_in_results_even_when_the_server_echoes_it(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn = make_connector(
        server.url,
        auth_type="basic",
        credentials={"username": "svc-user", "password": "hunter2-pass"},
    )
    action = make_action(
        method="POST",
        path="/status/{code}",
        parameters={"type": "object", "properties": {"code": {"type": "integer"}}},
    )
    ok = await executor.execute(conn, make_action(), {}, CTX)
    failed = await executor.execute(conn, action, {"code": 400}, CTX)
    encoded = base64.b64encode(b"svc-user:hunter2-pass").decode()
    for text in (ok.output, failed.error or ""):
        assert "hunter2-pass" not in text
        assert encoded not in text
    assert "Basic ***" in ok.output


# --- parameter placement ---------------------------------------------------------------


LOCATED = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "q": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "X-Trace": {"type": "string", "x-location": "header"},
        "limit": {"type": "integer", "x-location": "query"},
        "title": {"type": "string"},
        "done": {"type": "boolean"},
    },
    "required": ["id"],
}


async def test_each_location_reaches_the_server(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    action = make_action(method="POST", path="/tasks/{id}/notes", parameters=LOCATED)
    args = {"id": "a bé", "X-Trace": "t-1", "limit": 5, "title": "Hi", "done": False}
    seen(await executor.execute(make_connector(server.url), action, args, CTX))
    data = server.last
    assert data["raw_path"] == "/tasks/a%20b%C3%A9/notes"
    assert data["query"] == [["limit", "5"]]
    assert data["headers"]["x-trace"] == "t-1"
    assert data["body"] == {"title": "Hi", "done": False}


async def test_get_defaults_to_query_and_repeats_arrays(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    action = make_action(method="GET", path="/search", parameters=LOCATED)
    data = seen(
        await executor.execute(
            make_connector(server.url), action, {"id": "7", "q": "x y", "tags": ["a", "b"]}, CTX
        )
    )
    assert data["query"] == [["id", "7"], ["q", "x y"], ["tags", "a"], ["tags", "b"]]
    assert data["body"] is None


@pytest.mark.parametrize("bad", ["../admin", "a/b", "a\\b", "..", ""])
async def test_path_traversal_values_are_refused(
    executor: ConnectorExecutor, server: LocalServer, bad: str
) -> None:
    action = make_action(path="/files/{id}", parameters=LOCATED)
    result = await executor.execute(make_connector(server.url), action, {"id": bad}, CTX)
    assert not result.ok
    assert "Path parameter 'id' must be a non-empty segment" in (result.error or "")


async def test_arguments_are_validated_against_the_schema(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    action = make_action(path="/tasks/{id}", parameters=LOCATED)
    result = await executor.execute(
        make_connector(server.url), action, {"limit": "ten", "titel": "x"}, CTX
    )
    assert not result.ok
    assert result.error == (
        "Invalid parameters for 'act': (root): 'id' is a required property; "
        "limit: 'ten' is not of type 'integer'; titel: unknown parameter (did you mean "
        "'title'?); valid: X-Trace, done, id, limit, q, tags, title"
    )
    assert result.step == "connector:svc/act"


async def test_body_template_keeps_types_and_drops_missing(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    template = {
        "issue": {
            "title": "{{title}}",
            "points": "{{points}}",
            "labels": "{{labels}}",
            "owner": "{{owner}}",
        },
        "summary": "{{title}} ({{points}} pts)",
        "fixed": [1, "{{points}}"],
    }
    params = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "points": {"type": "integer"},
            "labels": {"type": "array"},
            "owner": {"type": "string"},
        },
    }
    action = make_action(method="POST", path="/issues", parameters=params, body_template=template)
    data = seen(
        await executor.execute(
            make_connector(server.url),
            action,
            {"title": "Bug", "points": 3, "labels": ["a", "b"]},
            CTX,
        )
    )
    assert data["body"] == {
        "issue": {"title": "Bug", "points": 3, "labels": ["a", "b"]},
        "summary": "Bug (3 pts)",
        "fixed": [1, 3],
    }


# --- responses ---------------------------------------------------------------------------


async def test_large_json_list_is_truncated_with_a_hint(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    action = make_action(
        path="/items", parameters={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    result = await executor.execute(make_connector(server.url), action, {"n": 57}, CTX)
    lines = result.output.splitlines()
    assert lines[:2] == ["HTTP 200 OK", "[showing 10/57 items, keys: id, name, status]"]
    assert json.loads("\n".join(lines[2:]))[-1] == {"id": 9, "name": "item-9", "status": "ok"}


async def test_response_size_cap_stops_reading(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    action = make_action(
        path="/big", parameters={"type": "object", "properties": {"size": {"type": "integer"}}}
    )
    result = await executor.execute(make_connector(server.url), action, {"size": 500_000}, CTX)
    assert result.ok
    assert result.output.endswith(
        "[Truncated: 65536 chars total]\n[Response exceeded 65536 bytes; stopped reading]"
    )


@pytest.mark.parametrize(
    ("code", "retryable"), [(404, False), (422, False), (429, True), (500, True), (503, True)]
)
async def test_non_2xx_is_a_failure_with_an_excerpt(
    http: httpx.AsyncClient,
    local_settings: Settings,
    server: LocalServer,
    code: int,
    retryable: bool,
) -> None:
    ex = ConnectorExecutor(http=http, settings=local_settings, audit=None)
    action = make_action(
        path="/status/{code}",
        parameters={"type": "object", "properties": {"code": {"type": "integer"}}},
    )
    result = await ex.execute(make_connector(server.url), action, {"code": code}, CTX)
    assert not result.ok
    assert result.retryable is retryable
    assert result.error is not None
    assert result.error.startswith(f"HTTP {code} ")
    assert f'"error":"status {code}"' in result.error
    if code == 429:
        assert "(retry after 7s)" in result.error


async def test_read_timeout(executor: ConnectorExecutor, server: LocalServer) -> None:
    conn = make_connector(server.url, timeout_s=0.3)
    action = make_action(
        path="/slow", parameters={"type": "object", "properties": {"delay": {"type": "number"}}}
    )
    result = await executor.execute(conn, action, {"delay": 2}, CTX)
    assert (result.ok, result.error, result.retryable) == (
        False,
        "Timed out after 0.3s (read)",
        True,
    )


async def test_total_timeout_bounds_a_trickling_response(
    http: httpx.AsyncClient, server: LocalServer
) -> None:
    settings = Settings(egress_allow_cidrs=["127.0.0.0/8"], tool_timeout_s=0.5)
    ex = ConnectorExecutor(http=http, settings=settings, audit=None)
    conn = make_connector(server.url, timeout_s=5)  # each byte arrives well within 5 s
    action = make_action(path="/trickle")
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await ex.execute(conn, action, {}, CTX)
    assert result.error == "Timed out after 0.5s (total)"
    assert loop.time() - started < 1.5


async def test_redirect_to_another_origin_drops_credentials(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    other = LocalServer("127.0.0.2").start()
    try:
        conn = make_connector(server.url, auth_type="api_key", credentials={"api_key": TOKEN})
        action = make_action(
            path="/redirect",
            parameters={"type": "object", "properties": {"to": {"type": "string"}}},
        )
        same = seen(await executor.execute(conn, action, {"to": "/landed"}, CTX))
        assert (same["path"], same["headers"]["x-api-key"]) == ("/landed", "***")
        moved = seen(await executor.execute(conn, action, {"to": f"{other.url}/away"}, CTX))
        assert moved["path"] == "/away"
        assert moved["headers"]["host"] == f"127.0.0.2:{other.port}"
        assert "x-api-key" not in moved["headers"]
    finally:
        other.stop()


# --- breaker and retries ----------------------------------------------------------------


def _failing(server: LocalServer) -> tuple[Any, Any]:
    action = make_action(
        path="/status/{code}",
        parameters={"type": "object", "properties": {"code": {"type": "integer"}}},
    )
    return make_connector(server.url, name="flaky"), action


async def test_breaker_opens_after_consecutive_failures(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn, action = _failing(server)
    for _ in range(3):
        result = await executor.execute(conn, action, {"code": 503}, CTX)
        assert result.error is not None
        assert result.error.startswith("HTTP 503")
    blocked = await executor.execute(conn, action, {"code": 200}, CTX)
    assert blocked.retryable
    assert blocked.error is not None
    assert blocked.error.startswith(
        "Connector 'flaky' is unavailable: circuit open after 3 consecutive failures"
    )
    assert executor.breaker(conn).state == "open"


async def test_breaker_half_open_trial_closes_or_reopens(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn, action = _failing(server)
    for _ in range(3):
        await executor.execute(conn, action, {"code": 500}, CTX)
    await asyncio.sleep(0.35)
    assert executor.breaker(conn).state == "half_open"
    reopened = await executor.execute(conn, action, {"code": 502}, CTX)
    assert reopened.error is not None
    assert reopened.error.startswith("HTTP 502")
    assert executor.breaker(conn).state == "open"
    await asyncio.sleep(0.35)
    assert (await executor.execute(conn, action, {"code": 200}, CTX)).ok
    assert executor.breaker(conn).state == "closed"


async def test_client_errors_do_not_trip_the_breaker(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    conn, action = _failing(server)
    for _ in range(5):
        await executor.execute(conn, action, {"code": 404}, CTX)
    assert executor.breaker(conn).state == "closed"


class CountingTransport(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        return await super().handle_async_request(request)


@pytest.fixture
def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()
    return port


@pytest.mark.parametrize(
    ("method", "attempts"), [("GET", 3), ("PUT", 3), ("POST", 1), ("PATCH", 1)]
)
async def test_connect_errors_retry_only_idempotent_methods(
    local_settings: Settings, closed_port: int, method: str, attempts: int
) -> None:
    transport = CountingTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        ex = ConnectorExecutor(
            http=client, settings=local_settings, audit=None, retry_backoff_s=0.001
        )
        conn = make_connector(f"http://127.0.0.1:{closed_port}")
        result = await ex.execute(conn, make_action(method=method), {}, CTX)
    assert not result.ok
    assert result.retryable
    assert result.error is not None
    assert result.error.startswith(f"Cannot connect to http://127.0.0.1:{closed_port}/echo")
    assert transport.calls == attempts


async def test_egress_is_enforced_for_connectors(
    http: httpx.AsyncClient, server: LocalServer
) -> None:
    strict = Settings()
    ex = ConnectorExecutor(http=http, settings=strict, audit=None)
    result = await ex.execute(make_connector(server.url), make_action(), {}, CTX)
    assert result.error == (
        f"Egress blocked: 127.0.0.1 (loopback) is not an allowed destination for {server.url}/echo"
        "; to allow it, add 127.0.0.1/32 to QUIVER_EGRESS_ALLOW_CIDRS"
    )
    assert not result.retryable


@pytest.fixture
def blackhole_port() -> Iterator[int]:
    """A listener whose backlog is full, so new connections hang until they time out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    fillers = []
    for _ in range(5):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in (*fillers, listener):
        sock.close()


@pytest.mark.parametrize(("method", "attempts"), [("GET", 3), ("POST", 1)])
async def test_connect_timeout_is_reported_and_retried_when_idempotent(
    local_settings: Settings, blackhole_port: int, method: str, attempts: int
) -> None:
    transport = CountingTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        ex = ConnectorExecutor(
            http=client, settings=local_settings, audit=None, retry_backoff_s=0.001
        )
        conn = make_connector(f"http://127.0.0.1:{blackhole_port}", timeout_s=0.2)
        result = await ex.execute(conn, make_action(method=method), {}, CTX)
    assert (result.ok, result.error, result.retryable) == (
        False,
        "Timed out after 0.2s (connect)",
        True,
    )
    assert transport.calls == attempts
