"""Run one connector action over HTTP — the `ConnectorBackend` implementation.

Order of a call: inject auth → check arguments (unless the pipeline already did, see
`CheckedArguments`) → place them (path/query/header/body) → circuit breaker → guarded
request (egress check per hop, size cap, timeouts; retried only for idempotent methods on
connect errors) → text for the model (status line + truncated body) → one audit row
queued. Every string that leaves this module passes the connector's
`Redactor`, so a server echoing the credentials back cannot leak them to the model.

See docs/contract.md §7.1.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from app.config import Settings
from app.connectors.actions import (
    ParameterError,
    RequestParts,
    action_step,
    build_request_parts,
    check_action_arguments,
    encode_body,
)
from app.connectors.audit import AuditEntry, AuditSink
from app.connectors.auth import AuthError, AuthParts, Redactor, build_auth
from app.connectors.breaker import CircuitBreaker
from app.connectors.models import Connector, ConnectorAction
from app.connectors.params import merge_query, with_query
from app.security.egress import (
    ConnectFailed,
    EgressGuard,
    FetchError,
    GuardedResponse,
    RequestTimeout,
    Timeouts,
    guarded_request,
)
from app.tools.base import CallContext, ToolResult
from app.tools.truncate import truncate_for_model

logger = logging.getLogger(__name__)

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})
_ERROR_EXCERPT_CHARS = 1000
_AUDIT_ERROR_CHARS = 1000
CANCELLED_AUDIT_ERROR = "cancelled: the request was aborted"


@dataclass(frozen=True, kw_only=True)
class _Outcome:
    result: ToolResult
    status_code: int | None = None


class ConnectorExecutor:
    """Executes connector actions through one shared `httpx.AsyncClient`."""

    def __init__(
        self,
        *,
        http: httpx.AsyncClient,
        settings: Settings,
        audit: AuditSink | None,
        breaker_threshold: int = 5,
        breaker_cooldown_s: float = 30.0,
        connect_retries: int = 2,
        retry_backoff_s: float = 0.1,
        max_output_chars: int = 8000,
    ) -> None:
        self._http = http
        self._settings = settings
        self._audit = audit
        self._guard = EgressGuard(settings)
        self._breaker_threshold = breaker_threshold
        self._breaker_cooldown_s = breaker_cooldown_s
        self._connect_retries = connect_retries
        self._retry_backoff_s = retry_backoff_s
        self._max_output_chars = max_output_chars
        self._breakers: dict[str, CircuitBreaker] = {}

    def breaker(self, connector: Connector) -> CircuitBreaker:
        key = str(connector.id or connector.name)
        found = self._breakers.get(key)
        if found is None:
            found = CircuitBreaker(
                failure_threshold=self._breaker_threshold, cooldown_s=self._breaker_cooldown_s
            )
            self._breakers[key] = found
        return found

    async def execute(
        self,
        connector: Connector,
        action: ConnectorAction,
        arguments: Mapping[str, Any],
        ctx: CallContext,
    ) -> ToolResult:
        """Run `action` with `arguments`; failures come back as `ToolResult.fail`.

        Arguments the pipeline checked (`CheckedArguments`) are trusted; any others (a direct
        caller) pass the same check first.
        """
        started = time.perf_counter()
        redactor = Redactor.for_connector(connector)
        try:
            auth = build_auth(connector)
            redactor = Redactor.for_connector(connector, auth)
            checked = check_action_arguments(action, arguments)
            outcome = await self._run(connector, action, checked, auth, redactor)
        except (ParameterError, AuthError) as exc:
            outcome = _Outcome(result=ToolResult.fail(redactor.text(str(exc))))
        except asyncio.CancelledError:
            # The run was cancelled: the request was aborted (its connection closed).
            aborted = _Outcome(result=ToolResult.fail(CANCELLED_AUDIT_ERROR))
            self._record(connector, action, arguments, ctx, aborted, redactor, started)
            raise
        result = _with_step(outcome.result, action_step(connector, action))
        self._record(connector, action, arguments, ctx, outcome, redactor, started)
        return result

    async def aclose(self) -> None:
        """Flush pending audit rows (the HTTP client belongs to the app lifespan)."""
        if self._audit is not None:
            await self._audit.aclose()

    async def _run(
        self,
        connector: Connector,
        action: ConnectorAction,
        arguments: Mapping[str, Any],
        auth: AuthParts,
        redactor: Redactor,
    ) -> _Outcome:
        parts = build_request_parts(action, arguments)
        breaker = self.breaker(connector)
        if not breaker.allow():
            return _Outcome(
                result=ToolResult.fail(
                    f"Connector {connector.name!r} is unavailable: circuit open after "
                    f"{breaker.failures} consecutive failures; "
                    f"retry in {breaker.retry_after():.0f}s",
                    retryable=True,
                )
            )
        try:
            response = await self._send(connector, action, parts, auth)
        except FetchError as exc:
            if exc.retryable:
                breaker.record_failure()
            else:
                breaker.release()
            return _Outcome(
                result=ToolResult.fail(redactor.text(str(exc)), retryable=exc.retryable)
            )
        except BaseException:
            breaker.release()
            raise
        if response.status_code >= 500:
            breaker.record_failure()
        elif response.status_code == 429:
            breaker.release()
        else:
            breaker.record_success()
        return _Outcome(
            result=self._to_result(response, redactor), status_code=response.status_code
        )

    async def _send(
        self,
        connector: Connector,
        action: ConnectorAction,
        parts: RequestParts,
        auth: AuthParts,
    ) -> GuardedResponse:
        method = (action.method or "GET").upper()
        headers = httpx.Headers(parts.headers)
        for name, value in auth.headers.items():
            headers[name] = value
        encoded = encode_body(parts)
        if encoded is not None:
            headers["Content-Type"] = encoded[1]
        url = with_query(
            connector.base_url.rstrip("/") + "/" + parts.path.lstrip("/"),
            merge_query(parts.query, auth.params),
        )
        read = connector.timeout_s or self._settings.http_timeout_s
        # read/connect come from the connector; the whole exchange (redirects included)
        # stays within the pipeline's per-tool-call limit
        timeouts = Timeouts(connect=min(10.0, read), read=read, total=self._settings.tool_timeout_s)
        attempts = 1 + (self._connect_retries if method in IDEMPOTENT_METHODS else 0)
        for attempt in range(attempts):
            try:
                return await guarded_request(
                    self._http,
                    self._guard,
                    method,
                    url,
                    headers=headers,
                    json=parts.body if parts.has_body and encoded is None else None,
                    content=encoded[0] if encoded is not None else None,
                    timeout=timeouts,
                    max_bytes=self._settings.http_max_response_bytes,
                    strip_on_redirect=auth.header_names,
                )
            except (ConnectFailed, RequestTimeout) as exc:
                connect_phase = isinstance(exc, ConnectFailed) or exc.phase == "connect"
                if not connect_phase or attempt + 1 >= attempts:
                    raise
                await asyncio.sleep(self._retry_backoff_s * (2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _to_result(self, response: GuardedResponse, redactor: Redactor) -> ToolResult:
        status = f"HTTP {response.status_code} {response.reason}".rstrip()
        text = redactor.text(response.text())
        cap_note = ""
        if response.truncated:
            cap_note = (
                f"\n[Response exceeded {self._settings.http_max_response_bytes} bytes; "
                "stopped reading]"
            )
        if 200 <= response.status_code < 300:
            body = truncate_for_model(text, max_chars=self._max_output_chars) if text else ""
            return ToolResult.success(f"{status}\n{body or '(empty body)'}{cap_note}")
        excerpt = truncate_for_model(text, max_chars=_ERROR_EXCERPT_CHARS) if text else ""
        retry_after = response.headers.get("retry-after")
        if response.status_code == 429 and retry_after:
            status += f" (retry after {redactor.text(retry_after)}s)"
        retryable = response.status_code == 429 or response.status_code >= 500
        message = f"{status}: {excerpt}" if excerpt else status
        return ToolResult.fail(message + cap_note, retryable=retryable)

    def _record(
        self,
        connector: Connector,
        action: ConnectorAction,
        arguments: Mapping[str, Any],
        ctx: CallContext,
        outcome: _Outcome,
        redactor: Redactor,
        started: float,
    ) -> None:
        if self._audit is None:
            return
        error = outcome.result.error
        self._audit.record(
            AuditEntry(
                connector_id=connector.id,
                connector_name=connector.name,
                action=action.name,
                arguments=redactor.arguments(dict(arguments)),
                ok=outcome.result.ok,
                status_code=outcome.status_code,
                error=redactor.text(error)[:_AUDIT_ERROR_CHARS] if error else None,
                latency_ms=round((time.perf_counter() - started) * 1000, 3),
                run_id=ctx.run_id,
            )
        )


def _with_step(result: ToolResult, step: str) -> ToolResult:
    if result.ok:
        return ToolResult.success(result.output, step=step)
    return ToolResult.fail(result.error or "", retryable=result.retryable, step=step)
