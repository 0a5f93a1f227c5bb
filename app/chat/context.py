"""Keeps each model call inside the agent's token budget.

Full schemas and results live in the conversation, not the system prompt, so they can be
cleared when the window fills: the oldest tool results go first (discover/list outputs
before anything else), each replaced by a one-line placeholder that says how to get it
back. The system prompt and the newest turn are never touched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.kit.tokens import count_json_tokens, count_tokens
from app.llm.types import ChatMessage

_MESSAGE_OVERHEAD = 4
_LISTING_SUBCOMMANDS = {"discover", "list_tables", "describe_table"}


@dataclass(frozen=True, kw_only=True)
class Compaction:
    before_tokens: int
    after_tokens: int
    cleared: list[str]


def message_tokens(message: ChatMessage) -> int:
    total = _MESSAGE_OVERHEAD + count_tokens(message.content or "")
    for call in message.tool_calls or ():
        total += count_tokens(call.name) + count_tokens(call.arguments)
    return total


def conversation_tokens(messages: list[ChatMessage], tools: list[dict[str, Any]]) -> int:
    return sum(message_tokens(m) for m in messages) + (count_json_tokens(tools) if tools else 0)


def _describe_call(name: str, raw_arguments: str) -> tuple[str, bool]:
    """A short label for what produced a result, and whether it was a discover/list call."""
    try:
        args = json.loads(raw_arguments or "{}")
    except json.JSONDecodeError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    sub = str(args.get("subcommand", ""))
    target = args.get("connector") or args.get("database") or args.get("server") or ""
    if args.get("table"):
        target = f"{target}.{args['table']}"
    listing = sub in _LISTING_SUBCOMMANDS or name.endswith(("__list_tables", "__describe_table"))
    listing = listing or name == "read_skill"
    if sub:
        return f"{sub} {target}".strip(), listing
    if name == "read_skill" and args.get("name"):
        return f"read_skill {args['name']}", listing
    return name, listing


def _placeholder(label: str, tokens: int) -> str:
    return f"[cleared: {label}, {tokens:,} tokens — call {label.split(' ')[0]} again if needed]"


def compact(
    messages: list[ChatMessage], tools: list[dict[str, Any]], *, budget: int
) -> Compaction | None:
    """Clear old tool results in place until the conversation fits `budget`; None if it fit."""
    before = conversation_tokens(messages, tools)
    if before <= budget:
        return None
    calls: dict[str, tuple[str, str]] = {}
    last_assistant = max(
        (i for i, m in enumerate(messages) if m.role == "assistant" and m.tool_calls), default=-1
    )
    for msg in messages:
        for call in msg.tool_calls or ():
            calls[call.id] = (call.name, call.arguments)
    candidates: list[tuple[bool, int]] = []
    for index, msg in enumerate(messages):
        if msg.role != "tool" or index > last_assistant:
            continue
        if (msg.content or "").startswith("[cleared: "):
            continue
        name, raw = calls.get(msg.tool_call_id or "", (msg.name or "tool", "{}"))
        _, listing = _describe_call(name, raw)
        candidates.append((not listing, index))
    candidates.sort()
    current = before
    cleared: list[str] = []
    for _, index in candidates:
        if current <= budget:
            break
        msg = messages[index]
        name, raw = calls.get(msg.tool_call_id or "", (msg.name or "tool", "{}"))
        label, _ = _describe_call(name, raw)
        old = message_tokens(msg)
        msg.content = _placeholder(label, count_tokens(msg.content or ""))
        current -= old - message_tokens(msg)
        cleared.append(label)
    return Compaction(before_tokens=before, after_tokens=current, cleared=cleared)
