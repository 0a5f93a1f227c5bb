"""Which calls wait for a person because of the agent's `approval.tools` globs.

Connector actions marked `requires_confirmation` and database writes are decided by their
executors (they answer `ToolResult.needs_approval` without doing anything); this module
covers the globs, matched with the tool profile's rules against the tool name and the
call's target (`connector:jira/create_issue`, `mcp:github/create_pr`, `database:sales/query`).
Discover, search and list calls never wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.agents.config import Approval
from app.reasoning.profile import glob_match

ACTING_SUBCOMMANDS = {"connector": "execute", "mcp": "call", "database": "query"}
"""Meta-tool → the one subcommand that acts; its other subcommands only look."""
NEVER_WAIT = frozenset({"request_tools"})
LOOKING_DATABASE_TARGETS = ("/list_tables", "/describe_table", "/discover")
"""Legacy database tools that only read the cached schema (`sales__list_tables`, …)."""


def glob_reason(
    config: Approval | None, name: str, kind: str, arguments: Mapping[str, Any], step: str
) -> str | None:
    """Why this call waits (the first matching glob), or None."""
    if config is None or not config.tools or name in NEVER_WAIT:
        return None
    acting = ACTING_SUBCOMMANDS.get(name)
    if acting is not None and kind in ("meta", name) and arguments.get("subcommand") != acting:
        return None
    if kind == "database" and step.endswith(LOOKING_DATABASE_TARGETS):
        return None
    for pattern in config.tools:
        if glob_match(pattern, name) or (step and glob_match(pattern, step)):
            return f"{step or name} matches the agent's approval rule {pattern!r}"
    return None
