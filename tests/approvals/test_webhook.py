"""Approval notifications against a real HTTP receiver on 127.0.0.1: the signed payload,
retries with back-off, refusals, the egress guard, the bounded queue, and a run that a hanging
receiver never holds up."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.approvals.notify import ApprovalNotice, ApprovalNotifier, sign
from app.config import Settings
from app.main import create_app
from app.security.egress import new_http_client
from app.security.redact import register_secret
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import SseReader, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

SECRET = "whsec_test_0123456789abcdef"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "notifications.md"


@dataclass
class Receiver:
    """Records every delivery; answers the scripted statuses in order (then 200), or hangs."""

    statuses: list[int] = field(default_factory=list)
    hang_s: float = 0.0
    hits: list[tuple[dict[str, str], bytes, float]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at teardown: hanging handlers return (so the server can stop)."""

    async def handle(self, request: Request) -> JSONResponse:
        body = await request.body()
        loop = asyncio.get_running_loop()
        self.hits.append((dict(request.headers), body, loop.time()))
        self.arrived.set()
        if self.hang_s:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.release.wait(), self.hang_s)
        status = self.statuses.pop(0) if self.statuses else 200
        return JSONResponse({"ok": status < 300}, status)

    def verified(self, index: int = -1) -> dict[str, Any]:
        """The delivery's JSON after checking its signature as a receiver would."""
        headers, body, _ = self.hits[index]
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["x-quiver-signature"], expected)
        payload: dict[str, Any] = json.loads(body)
        return payload


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    rec = Receiver()
    app = Starlette(routes=[Route("/hook", rec.handle, methods=["POST"])])
    async with serve_app(app) as base_url:  # type: ignore[arg-type]
        try:
            yield rec, f"{base_url}/hook"
        finally:
            rec.release.set()


def settings_for(url: str, **extra: Any) -> Settings:
    fields: dict[str, Any] = {
        "approval_webhook_url": url,
        "approval_webhook_secret": SECRET,
        "approval_webhook_backoff_s": 0.05,
        "approval_webhook_timeout_s": 2.0,
        "egress_allow_cidrs": ["127.0.0.0/8"],
        "public_url": "https://quiver.example.com/",
        **extra,
    }
    return Settings(**fields)


def notice(**fields: Any) -> ApprovalNotice:
    base: dict[str, Any] = {
        "approval_id": uuid.uuid4(),
        "run_id": uuid.uuid4(),
        "agent_id": uuid.uuid4(),
        "agent": "support",
        "tool": "connector",
        "target": "connector:desk/open_ticket",
        "arguments": {"subcommand": "execute", "parameters": {"title": "printer on fire"}},
        "reason": "open_ticket requires confirmation",
        "expires_at": datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
        "user": "alice",
    }
    return ApprovalNotice(**(base | fields))


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    client = new_http_client(Settings(), strict=False)
    yield client
    await client.aclose()


async def test_a_notice_is_signed_json_with_a_console_link(
    receiver: tuple[Receiver, str], http: httpx.AsyncClient
) -> None:
    rec, url = receiver
    register_secret("tok_live_abcdef123456")
    item = notice(arguments={"title": "printer", "api_token": "tok_live_abcdef123456"})
    notifier = ApprovalNotifier(settings_for(url), http)
    assert await notifier.deliver(item) is True
    payload = rec.verified()
    run, approval = item.run_id, item.approval_id
    assert payload == {
        "event": "approval_requested",
        "approval_id": str(approval),
        "run_id": str(run),
        "agent": {"id": str(item.agent_id), "name": "support"},
        "tool": {"name": "connector", "target": "connector:desk/open_ticket"},
        "arguments": {"title": "printer", "api_token": "***"},
        "reason": "open_ticket requires confirmation",
        "user": "alice",
        "expires_at": "2030-01-02T03:04:05Z",
        "console_url": f"https://quiver.example.com/ui/runs/{run}",
        "decide_url": f"https://quiver.example.com/api/v1/runs/{run}/approvals/{approval}",
        "text": (
            "Approval needed: agent support wants to run connector:desk/open_ticket "
            "(expires 2030-01-02T03:04:05Z). Review it in Quiver: "
            f"https://quiver.example.com/ui/runs/{run}"
        ),
    }
    headers = rec.hits[0][0]
    assert headers["content-type"] == "application/json"
    assert headers["x-quiver-event"] == "approval_requested"
    assert headers["x-quiver-delivery"] == str(approval)
    assert "tok_live_abcdef123456" not in rec.hits[0][1].decode()
    assert sign(SECRET, rec.hits[0][1]) == headers["x-quiver-signature"]


async def test_a_failing_receiver_is_retried_with_back_off(
    receiver: tuple[Receiver, str], http: httpx.AsyncClient
) -> None:
    rec, url = receiver
    rec.statuses = [500, 503, 429]
    notifier = ApprovalNotifier(settings_for(url, approval_webhook_backoff_s=0.2), http)
    assert await notifier.deliver(notice()) is True
    assert len(rec.hits) == 4
    bodies = {body for _, body, _ in rec.hits}
    assert len(bodies) == 1  # the same body (and signature) each time
    gaps = [b[2] - a[2] for a, b in zip(rec.hits, rec.hits[1:], strict=False)]
    assert gaps[0] >= 0.15  # 0.2 s ± jitter
    assert gaps[1] >= 0.3  # twice as long
    assert gaps[2] >= 0.6
    assert (notifier.delivered, notifier.dropped) == (1, 0)


async def test_attempts_are_bounded_and_a_refusal_is_not_retried(
    receiver: tuple[Receiver, str], http: httpx.AsyncClient
) -> None:
    rec, url = receiver
    rec.statuses = [500] * 10
    notifier = ApprovalNotifier(settings_for(url, approval_webhook_attempts=3), http)
    assert await notifier.deliver(notice()) is False
    assert len(rec.hits) == 3
    rec.hits.clear()
    rec.statuses = [400, 200]
    assert await notifier.deliver(notice()) is False
    assert len(rec.hits) == 1
    assert notifier.dropped == 2


async def test_the_egress_guard_applies(
    receiver: tuple[Receiver, str], http: httpx.AsyncClient
) -> None:
    rec, url = receiver
    notifier = ApprovalNotifier(settings_for(url, egress_allow_cidrs=[]), http)
    assert await notifier.deliver(notice()) is False
    assert rec.hits == []  # loopback is not an allowed destination unless opened


async def test_notify_never_waits_and_the_queue_is_bounded(
    receiver: tuple[Receiver, str], http: httpx.AsyncClient
) -> None:
    rec, url = receiver
    rec.hang_s = 5.0
    notifier = ApprovalNotifier(settings_for(url, approval_webhook_queue=2), http)
    try:
        loop = asyncio.get_running_loop()
        spent = 0.0
        for _ in range(10):  # 4 senders take one each, 2 wait in the queue, 4 are dropped
            started = loop.time()
            notifier.notify(notice())
            spent += loop.time() - started
            await asyncio.sleep(0.02)  # the senders pick up what is queued
        assert spent < 0.05
        await asyncio.wait_for(rec.arrived.wait(), 5)
        await asyncio.sleep(0.3)
        assert len(rec.hits) == 4
        assert notifier.dropped == 4
    finally:
        await notifier.aclose()


def test_the_url_needs_a_secret_and_must_be_http() -> None:
    with pytest.raises(ValueError, match="approval_webhook_secret"):
        Settings(approval_webhook_url="https://hooks.example.com/x")
    with pytest.raises(ValueError, match="approval_webhook_url"):
        Settings(approval_webhook_url="ftp://hooks.example.com/x", approval_webhook_secret="s")


# --- a live run: the notification is sent, a hanging receiver never holds the run -----------


async def test_a_run_notifies_each_new_approval_without_waiting_for_the_receiver(
    committing_settings: Settings,
    scripted_llm_session: ScriptedLLM,
    scripted_llm: ScriptedLLM,
    receiver: tuple[Receiver, str],
) -> None:
    rec, url = receiver
    rec.hang_s = 30.0  # the receiver never answers in time
    settings = committing_settings.model_copy(
        update={
            "llm_base_url": scripted_llm_session.base_url,
            "approval_webhook_url": url,
            "approval_webhook_secret": SecretStr(SECRET),
            "approval_webhook_timeout_s": 20.0,
            "egress_allow_cidrs": ["127.0.0.0/8"],
            "public_url": "https://quiver.example.com",
        }
    )
    async with (
        serve_app(create_app(settings)) as base_url,
        httpx.AsyncClient(base_url=base_url, headers=AUTH, timeout=30) as live,
    ):
        name = f"hooked_{uuid.uuid4().hex[:8]}"
        created = await live.post(
            "/api/v1/agents",
            json={
                "name": name,
                "instructions": "test",
                "model_config_json": {"approval": {"tools": ["http_fetch"], "timeout_s": 60}},
            },
        )
        assert created.status_code == 201, created.text
        agent = created.json()
        secret_url = "http://robot:hunter2hunter2@127.0.0.1:9/page"
        scripted_llm.script(
            Turn(tool_calls=[("f1", "http_fetch", {"url": secret_url})]), Turn(text="ok")
        )
        async with live.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
        ) as response:
            reader = SseReader(response)
            seen = []
            while not any(e.event == "approval_requested" for e in seen):
                seen += await asyncio.wait_for(reader.read(stop_after=1), 10)
            run_id = seen[0].data["run_id"]
            asked = seen[-1].data
            await asyncio.wait_for(rec.arrived.wait(), 10)
            payload = rec.verified()
            assert payload["approval_id"] == asked["approval_id"]
            assert payload["run_id"] == run_id
            assert payload["agent"] == {"id": agent["id"], "name": name}
            assert payload["tool"] == {"name": "http_fetch", "target": "http_fetch"}
            assert payload["arguments"] == {"url": "http://robot:***@127.0.0.1:9/page"}
            assert "hunter2hunter2" not in rec.hits[0][1].decode()
            assert payload["console_url"] == f"https://quiver.example.com/ui/runs/{run_id}"
            expires = datetime.fromisoformat(payload["expires_at"].replace("Z", "+00:00"))
            assert timedelta(seconds=50) < expires - datetime.now(UTC) <= timedelta(seconds=60)
            # The receiver is still hanging; the run goes on as soon as a person decides.
            decided = await live.post(
                f"/api/v1/runs/{run_id}/approvals/{asked['approval_id']}",
                json={"decision": "deny", "reason": "no"},
            )
            assert decided.status_code == 200
            rest = await asyncio.wait_for(reader.read(), 10)
        assert rest[-1].event == "run_finished"
        assert len(rec.hits) == 1


async def test_the_documented_verification_snippet_accepts_a_delivery_and_rejects_a_forgery(
    receiver: tuple[Receiver, str], http: httpx.AsyncClient
) -> None:
    rec, url = receiver
    page = DOCS_PAGE.read_text()
    snippet = page.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(snippet, "docs/notifications.md", "exec"), namespace)
    verify = namespace["verify"]
    assert await ApprovalNotifier(settings_for(url), http).deliver(notice()) is True
    headers, body, _ = rec.hits[0]
    assert verify(SECRET, body, headers["x-quiver-signature"]) is True
    assert (
        verify(SECRET, body.replace(b"support", b"attacker"), headers["x-quiver-signature"])
        is False
    )
    assert verify("another secret", body, headers["x-quiver-signature"]) is False
