"""One `tools/call` of an MCP session, exactly as a chat run's tool phase runs it, journaled.

A call journals a `tool_call` and a `tool_result` event, both stored before the answer goes
out: in one write when the call is quick (see `CALL_HELD_S`), else the `tool_call` on its own
first, so the journal shows the call in flight. The call returns as soon as its events are
queued; its `CallOutcome.stored` is done once they are committed, and the answer waits for
it, not the call (the transport holds the answer while the SDK prepares it:
`transport.answer_after`). The session's lock is held until they are stored: its next call,
its end and its hand-over to another worker read or number the journal after them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from app.approvals.gate import ApprovalGate
from app.audit.record import AuditRow
from app.chat.steps import PhaseResult
from app.events import RunEvent, ToolCallEvent, ToolResultEvent, ToolsLoaded
from app.llm.types import ChatMessage, ToolCallRequest
from app.mcpserver.state import CallOutcome, McpSession

CALL_HELD_S = 0.05
"""A `tool_call` event waits this long for its result, to be journaled with it in one write."""


class SessionReleased(Exception):
    """This worker let go of the session while the call waited for the one before it."""


async def run_call(
    state: McpSession,
    name: str,
    arguments: dict[str, Any],
    *,
    gate: ApprovalGate | None,
    audit_sink: Callable[[AuditRow], None],
) -> CallOutcome:
    """Run one call on the session (in call order); a call that needs a person's approval
    asks `gate` (the client's elicitation), or fails without it. Audit rows ride the call's
    journal write; `audit_sink` takes those that cannot."""
    await state.lock.acquire()
    stored: list[asyncio.Future[None]] = []
    try:
        outcome = await _run_locked(state, name, arguments, gate, audit_sink, stored)
    except BaseException:
        _release_after(state.lock, stored)
        raise
    # The lock is held until the call's events are stored, not until its answer is sent:
    # what comes next on the session (its next call, its end, its hand-over to another
    # worker) reads or numbers the journal after them.
    outcome.stored.add_done_callback(lambda _: state.lock.release())
    # One turn of the loop: the journal's writer, queued before, sends the write now, and the
    # commit runs while the SDK turns the result into its answer (`transport.answer_after`).
    await asyncio.sleep(0)
    return outcome


async def _run_locked(
    state: McpSession,
    name: str,
    arguments: dict[str, Any],
    gate: ApprovalGate | None,
    audit_sink: Callable[[AuditRow], None],
    stored: list[asyncio.Future[None]],
) -> CallOutcome:
    """The call under the session's lock; `stored` gets the futures of its journal writes."""
    if state.released:
        raise SessionReleased(state.session_id)
    state.phase.gate = gate
    state.calls += 1
    call = ToolCallRequest(id=f"mcp_{state.calls}", name=name, arguments=json.dumps(arguments))
    messages: list[ChatMessage] = []
    events: list[RunEvent] = []
    held: list[RunEvent] = []
    audited: list[AuditRow] = []
    timer: asyncio.TimerHandle | None = None

    def submit() -> None:  # queued in order, the held ones first
        nonlocal timer
        if timer is not None:
            timer.cancel()
            timer = None
        for event in held:  # the audit rows so far go with the last one
            audit = state.audit.take() if event is held[-1] else []
            audited.extend(audit)
            stored.append(state.journal.submit(event, audit=audit)[2])
        held.clear()

    try:
        async for event in state.phase.run([call], state.calls, messages):
            if isinstance(event, PhaseResult):
                continue  # the observation is in `messages`
            events.append(event)
            held.append(event)
            if isinstance(event, ToolCallEvent) and len(held) == 1:
                # Stored with its result (one statement) unless the call takes longer:
                # then on its own, so the journal shows the call in flight.
                timer = asyncio.get_running_loop().call_later(CALL_HELD_S, submit)
            else:
                submit()
    finally:
        submit()  # whatever happened so far, interrupted or not
    for row in state.audit.take():  # recorded after the last event (none so far)
        audit_sink(row)
    ok = any(isinstance(e, ToolResultEvent) and e.ok for e in events)
    loaded = tuple(n for e in events if isinstance(e, ToolsLoaded) for n in e.names)
    text = (messages[-1].content or "") if messages else ""
    return CallOutcome(text=text, ok=ok, loaded=loaded, stored=_stored(stored, audited, audit_sink))


def _release_after(lock: asyncio.Lock, pending: list[asyncio.Future[Any]]) -> None:
    """Release `lock` once every future of `pending` is done (at once if there is none)."""
    if not pending:
        lock.release()
        return
    waited = asyncio.gather(*pending, return_exceptions=True)
    waited.add_done_callback(lambda _: lock.release())


def _stored(
    stored: list[asyncio.Future[None]],
    audited: list[AuditRow],
    audit_sink: Callable[[AuditRow], None],
) -> asyncio.Future[Any]:
    """One future for the call's writes; when they fail, the call's audit rows are recorded
    apart (the call ran: its audit row is kept all the same), whoever waits or not."""
    done = asyncio.gather(*stored)

    def after(future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and future.exception() is not None:
            for row in audited:
                audit_sink(row)

    done.add_done_callback(after)
    return done
