"""The MCP configuration documents users already have: Claude Desktop's and Cursor's
`{"mcpServers": {...}}`, VS Code's `{"servers": {...}}` (`.vscode/mcp.json`, or under
`"mcp"` in `settings.json`), Claude Code's `.mcp.json`. Each entry becomes an
`McpServerCreate`, or the reason it cannot (the import goes on with the others)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from app.errors import Invalid
from app.mcp.schemas import McpServerCreate

_TRANSPORTS = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "streamable_http",
    "streamable-http": "streamable_http",
    "streamable_http": "streamable_http",
    "streamablehttp": "streamable_http",
}
_KNOWN = frozenset(
    {"command", "args", "env", "url", "serverUrl", "headers", "type", "transport", "description"}
)
_IGNORED = frozenset({"disabled", "alwaysAllow", "autoApprove", "autoapprove"})
_PLACEHOLDER = re.compile(r"\$\{(input|env|workspaceFolder|userHome)[^}]*\}")


@dataclass(kw_only=True)
class Entry:
    key: str
    """The server's name in the document."""
    server: McpServerCreate | None = None
    error: Invalid | None = None
    warnings: list[str] = field(default_factory=list)


def servers_of(document: dict[str, Any]) -> dict[str, Any]:
    """The servers mapping of any of the known layouts; 422 when there is none."""
    for holder in (document, document.get("mcp")):
        if not isinstance(holder, dict):
            continue
        for key in ("mcpServers", "servers"):
            found = holder.get(key)
            if isinstance(found, dict):
                if not found:
                    raise Invalid(f"{key}: no servers in the document")
                return found
    raise Invalid(
        'document: expected {"mcpServers": {...}} (Claude Desktop, Cursor, Claude Code) '
        'or {"servers": {...}} (VS Code)'
    )


def slug(key: str) -> str:
    """A document's server key as a Quiver name (`GitHub Server` → `github-server`)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", key.strip().lower()).strip("-_")
    return name[:64]


def parse_entry(key: str, raw: Any) -> Entry:
    entry = Entry(key=key)
    if not isinstance(raw, dict):
        entry.error = Invalid(f"{key}: each server must be an object")
        return entry
    name = slug(key)
    if not name:
        entry.error = Invalid(f"{key!r}: no usable name (letters, digits, '-' or '_')")
        return entry
    if name != key:
        entry.warnings.append(f"stored as {name!r}")
    unknown = sorted(set(raw) - _KNOWN - _IGNORED)
    if unknown:
        entry.warnings.append(f"ignored: {', '.join(unknown)} (not supported by Quiver)")
    url = raw.get("url") or raw.get("serverUrl")
    declared = str(raw.get("type") or raw.get("transport") or "").lower()
    if declared and declared not in _TRANSPORTS:
        entry.error = Invalid(f"{key}: type {declared!r} is not stdio, sse or http")
        return entry
    transport = _TRANSPORTS.get(declared) or _infer(raw.get("command"), url)
    body: dict[str, Any] = {
        "name": name,
        "description": raw.get("description") or "",
        "transport": transport,
    }
    if transport == "stdio":
        body |= {"command": raw.get("command"), "args": raw.get("args") or []}
        if raw.get("env"):
            body["env"] = raw["env"]
    else:
        body["url"] = url
        if raw.get("headers"):
            body["headers"] = raw["headers"]
    for where in ("env", "headers", "args"):
        if _PLACEHOLDER.search(str(raw.get(where) or "")):
            entry.warnings.append(
                f"{where} uses ${{...}} placeholders, which are stored as written: "
                "set the real values with PATCH /mcp-servers/{id}"
            )
    try:
        entry.server = McpServerCreate.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "server"
        entry.error = Invalid(f"{key}: {where}: {err['msg']}")
    return entry


def _infer(command: Any, url: Any) -> str:
    if command:
        return "stdio"
    if isinstance(url, str) and url.rstrip("/").endswith("/sse"):
        return "sse"
    return "streamable_http"
