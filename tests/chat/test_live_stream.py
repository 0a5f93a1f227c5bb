"""The live SSE stream of a run: pings while idle, frames in order, ends at the last event."""

from __future__ import annotations

import asyncio
import time
import uuid

from app.chat.active import ActiveRun
from app.chat.journal import JournalWriter
from app.chat.sse import PING, event_frame
from app.chat.streams import live_stream
from app.events import ModelDelta, RunFinished


async def test_pings_while_idle_then_sends_queued_events_and_ends_at_the_last() -> None:
    active = ActiveRun(run_id=uuid.uuid4(), conversation_id=uuid.uuid4())
    queue = active.subscribe()
    stream = live_stream(active, queue, ping_s=0.05)
    started = time.perf_counter()
    assert await anext(stream) == PING
    assert await anext(stream) == PING
    assert time.perf_counter() - started >= 0.1
    assert not active.first_out.is_set()  # a ping is not the first event
    delta = ModelDelta(text="hello")
    finished = RunFinished(status="completed", iterations=1, usage={}, elapsed_ms=1.0)
    active.publish((1, delta))
    active.publish((2, delta))  # already queued: sent with the first, in one write
    assert await anext(stream) == event_frame(1, delta) + event_frame(2, delta)
    assert not active.first_out.is_set()  # handed out, not sent yet
    later = asyncio.get_running_loop().call_later(0.01, active.publish, (3, finished))
    assert await anext(stream) == event_frame(3, finished)
    assert active.first_out.is_set()  # sent: the next frame was asked for
    assert [frame async for frame in stream] == []
    assert active.subscribers == []  # unsubscribed once it ended
    later.cancel()


async def test_ends_without_a_frame_when_the_final_event_was_not_stored() -> None:
    active = ActiveRun(run_id=uuid.uuid4(), conversation_id=uuid.uuid4())
    queue = active.subscribe()
    active.publish(None)
    assert [frame async for frame in live_stream(active, queue, ping_s=5)] == []
    assert active.first_out.is_set()  # a run waiting for its first event to be sent goes on


def test_the_live_event_is_the_stored_one_redacted_or_the_same_object() -> None:
    """`JournalWriter._clean`: what is sent equals what is stored (redacted, no NUL); an event
    with nothing to change is handed on as it is (no copy per model delta)."""
    plain = ModelDelta(text="hello")
    assert JournalWriter._clean(plain) == ({"text": "hello"}, plain)
    assert JournalWriter._clean(plain)[1] is plain
    secret = ModelDelta(text="use Bearer abcdefghijklmnopqrstuvwxyz0123 now\x00")
    data, clean = JournalWriter._clean(secret)
    assert clean is not secret
    assert isinstance(clean, ModelDelta)
    assert "abcdefghijklmnopqrstuvwxyz0123" not in clean.text
    assert "\x00" not in clean.text
    assert data == {"text": clean.text}
