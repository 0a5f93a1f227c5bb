"""RunEvent → SSE frame (`id:` / `event:` / `data:`), with the same adapter as the journal."""

from __future__ import annotations

import json
from typing import Any

from app.events import RunEvent, event_payload

PING = b": ping\n\n"


def frame(seq: int, kind: str, data: dict[str, Any]) -> bytes:
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"id: {seq}\nevent: {kind}\ndata: {body}\n\n".encode()


def event_frame(seq: int, event: RunEvent) -> bytes:
    return frame(seq, event.kind, event_payload(event))
