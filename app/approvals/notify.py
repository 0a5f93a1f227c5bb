"""Approval notifications: each new approval POSTed to `QUIVER_APPROVAL_WEBHOOK_URL`.

The body is JSON (docs/notifications.md), signed `X-Quiver-Signature: sha256=<hex>` (HMAC-SHA256
of the exact body with `QUIVER_APPROVAL_WEBHOOK_SECRET`). Delivery never blocks a run: the gate
only puts the notice on a bounded queue (a full queue drops it, logged); a few sender tasks
deliver through the egress guard, retrying timeouts, connection errors, 408, 429 and 5xx with
exponential back-off and jitter, the same body and delivery id each time. Logs never show
the URL (an incoming-webhook URL is itself a credential).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from app.config import Settings
from app.security.egress import EgressGuard, FetchError, guarded_request
from app.security.redact import redact

logger = logging.getLogger("quiver.approvals.notify")
SIGNATURE_HEADER = "X-Quiver-Signature"
SENDERS = 4
"""Deliveries in flight at once (a hanging receiver holds one sender, not the queue)."""
_RETRIED = frozenset({408, 425, 429})
_MAX_RESPONSE_BYTES = 64_000


@dataclass(frozen=True, kw_only=True)
class ApprovalNotice:
    """What a person needs to decide, as the webhook sends it."""

    approval_id: uuid.UUID
    run_id: uuid.UUID
    agent_id: uuid.UUID
    agent: str
    tool: str
    target: str
    arguments: dict[str, Any] | str
    reason: str
    expires_at: datetime
    user: str | None = None


def sign(secret: str, body: bytes) -> str:
    """The `X-Quiver-Signature` value of `body`."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _utc(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def payload(notice: ApprovalNotice, console: str) -> dict[str, Any]:
    """The JSON body; `text` is what Slack and Teams incoming webhooks display."""
    run_url = f"{console}/ui/runs/{notice.run_id}"
    what = notice.target or notice.tool
    return {
        "event": "approval_requested",
        "approval_id": str(notice.approval_id),
        "run_id": str(notice.run_id),
        "agent": {"id": str(notice.agent_id), "name": notice.agent},
        "tool": {"name": notice.tool, "target": notice.target},
        "arguments": redact(notice.arguments),
        "reason": redact(notice.reason),
        "user": notice.user,
        "expires_at": _utc(notice.expires_at),
        "console_url": run_url,
        "decide_url": f"{console}/api/v1/runs/{notice.run_id}/approvals/{notice.approval_id}",
        "text": (
            f"Approval needed: agent {notice.agent} wants to run {what} "
            f"(expires {_utc(notice.expires_at)}). Review it in Quiver: {run_url}"
        ),
    }


class ApprovalNotifier:
    """The background sender: `notify` never waits; `aclose` stops the senders."""

    def __init__(self, settings: Settings, http: httpx.AsyncClient) -> None:
        assert settings.approval_webhook_secret is not None, "checked by Settings"
        self._settings = settings
        self._url = settings.approval_webhook_url
        self._secret = settings.approval_webhook_secret.get_secret_value()
        self._console = settings.console_base_url
        self._http = http
        self._guard = EgressGuard(settings)
        self._queue: asyncio.Queue[ApprovalNotice] = asyncio.Queue(settings.approval_webhook_queue)
        self._senders: list[asyncio.Task[None]] = []
        self.delivered = 0
        self.dropped = 0
        """Notices given up on (queue full, refused, or out of attempts); for tests and logs."""

    @classmethod
    def from_settings(cls, settings: Settings, http: httpx.AsyncClient) -> ApprovalNotifier | None:
        """A notifier when `QUIVER_APPROVAL_WEBHOOK_URL` is set, else None."""
        return cls(settings, http) if settings.approval_webhook_url else None

    def notify(self, notice: ApprovalNotice) -> None:
        """Queue one notice (dropped, with a warning, when the queue is full)."""
        if not self._senders:
            self._senders = [
                asyncio.create_task(self._send_forever(), name=f"approval-webhook-{i}")
                for i in range(SENDERS)
            ]
        try:
            self._queue.put_nowait(notice)
        except asyncio.QueueFull:
            self.dropped += 1
            logger.warning(
                "approval webhook queue full (%d): notice for approval %s dropped",
                self._queue.maxsize,
                notice.approval_id,
            )

    async def _send_forever(self) -> None:
        while True:
            notice = await self._queue.get()
            try:
                await self.deliver(notice)
            except Exception:  # a sender never dies: the next notice still goes out
                logger.exception("approval webhook: delivery of %s failed", notice.approval_id)
            finally:
                self._queue.task_done()

    async def deliver(self, notice: ApprovalNotice) -> bool:
        """POST one notice, retrying with back-off; True once a receiver answered 2xx."""
        body = json.dumps(payload(notice, self._console), separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(self._secret, body),
            "X-Quiver-Event": "approval_requested",
            "X-Quiver-Delivery": str(notice.approval_id),
        }
        attempts = self._settings.approval_webhook_attempts
        for attempt in range(1, attempts + 1):
            outcome = await self._attempt(body, headers)
            if outcome == "ok":
                self.delivered += 1
                return True
            if outcome == "final" or attempt == attempts:
                break
            delay = self._settings.approval_webhook_backoff_s * 2 ** (attempt - 1)
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
        self.dropped += 1
        logger.warning(
            "approval webhook: notice for approval %s not delivered after %d attempt(s)",
            notice.approval_id,
            attempt,
        )
        return False

    async def _attempt(self, body: bytes, headers: dict[str, str]) -> str:
        """ok, retry, or final (a refusal that another try would not change)."""
        try:
            response = await guarded_request(
                self._http,
                self._guard,
                "POST",
                self._url,
                headers=headers,
                content=body,
                timeout=self._settings.approval_webhook_timeout_s,
                max_bytes=_MAX_RESPONSE_BYTES,
                max_redirects=0,
            )
        except FetchError as exc:  # its text names the URL, which may hold a token (Slack's)
            logger.warning("approval webhook: delivery failed (%s)", type(exc).__name__)
            return "retry" if exc.retryable else "final"
        status = response.status_code
        if 200 <= status < 300:
            return "ok"
        logger.warning("approval webhook: the receiver answered HTTP %d", status)
        return "retry" if status >= 500 or status in _RETRIED else "final"

    async def aclose(self) -> None:
        for task in self._senders:
            task.cancel()
        for task in self._senders:
            with contextlib.suppress(BaseException):
                await task
        self._senders = []
