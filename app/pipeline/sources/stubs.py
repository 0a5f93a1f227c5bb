"""The short texts shown in progressive mode: skill stubs and the meta-tools' catalogs (§4.3)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from app.connectors.models import Connector
from app.databases.models import DatabaseConnector
from app.mcp.models import McpServer
from app.pipeline.sources.disclosure import SKILLS_CAP, SKILLS_LISTED, Entry, ranked, source_stub
from app.pipeline.sources.rows import mcp_tool_names, visible_table_names
from app.skills.models import Skill
from app.tools.cache import DERIVED, row_key
from app.tools.render import one_line

SKILL_STUB_CHARS = 120
ACTIONS_LISTED = 20
TABLES_LISTED = 10
MCP_TOOLS_LISTED = 20

SKILLS_HEADING = "## Available Skills"
INLINE_SKILLS_HEADING = "## Skills"


def connector_key(connector: Connector, purpose: str) -> tuple[Hashable, ...] | None:
    """Cache key of what is derived from a connector and its actions: the connector's stamp
    and every action's `(id, updated_at)` in order. Exactly what it was derived from (the ORM
    stamps every write; an addition or removal changes the ids), in the order the legacy
    definitions are paired with the actions, whatever the writers' clocks.
    """
    base = row_key(connector, purpose)
    if base is None:
        return None
    actions = connector.actions
    if any(a.id is None or a.updated_at is None for a in actions):
        return None
    # UUIDs as ints: hashed in C (a UUID's own hash is Python code), ~2,000 per key.
    return (*base, tuple((a.id.int, a.updated_at) for a in actions))


def skill_stub(skill: Skill) -> str:
    """`- name: description`, one line, cut to 120 chars (117 + `...`)."""
    return DERIVED.get(
        row_key(skill, "stub"),
        lambda: one_line(f"- {skill.name}: {skill.description}", SKILL_STUB_CHARS),
    )


def skills_section(skills: Sequence[Skill], query: str = "") -> str:
    """The progressive system-prompt section; empty when the agent has no skills.

    Above 20 skills only the 10 best ranked for `query` (the user's message) get a stub.
    """
    if not skills:
        return ""
    if len(skills) <= SKILLS_CAP:
        return "\n".join([SKILLS_HEADING, *(skill_stub(s) for s in skills)])
    order = ranked(query, [Entry(s.name, s.description) for s in skills], SKILLS_LISTED)
    more = f"… and {len(skills) - len(order)} more: use read_skill with search"
    return "\n".join([SKILLS_HEADING, *(skill_stub(skills[i]) for i in order), more])


def skill_body(skill: Skill) -> str:
    """A skill's full text: what `read_skill` returns and what inline mode puts in the prompt."""
    parts = [skill.content.strip()]
    if skill.script:
        kind = skill.script_type or ""
        parts.append(f"Script ({kind or 'text'}):\n```{kind}\n{skill.script.rstrip()}\n```")
    return "\n\n".join(p for p in parts if p)


def skill_files_section(skill: Skill) -> str:
    """The files of the skill's folder, after its instructions (empty without any)."""
    files = skill.file_index or []
    if not files:
        return ""
    lines = ["", "", f"## Files in {skill.name}"]
    for info in files:
        notes = [_size(int(info.get("size") or 0))]
        if info.get("script"):
            notes.append("script: stored, not run here")
        elif not info.get("text"):
            notes.append(str(info.get("media_type") or "binary"))
        lines.append(f"- {info['path']} ({', '.join(notes)})")
    example = files[0]["path"]
    lines.append(f'Read one with read_skill(name="{skill.name}", path="{example}").')
    return "\n".join(lines)


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


def skills_inline(skills: Sequence[Skill]) -> str:
    """Inline mode: every skill's full content in the system prompt."""
    if not skills:
        return ""
    blocks = [INLINE_SKILLS_HEADING]
    for skill in skills:
        head = f"### {skill.name}"
        if skill.description:
            head += f"\n{one_line(skill.description)}"
        blocks.append(f"{head}\n\n{skill_body(skill)}")
    return "\n\n".join(blocks)


def connector_stub(connector: Connector) -> str:
    """`- jira: Jira Cloud. Actions (25): a, b, … and 5 more` (at most 20 action names)."""
    return DERIVED.get(connector_key(connector, "stub"), lambda: _connector_stub(connector))


def _connector_stub(connector: Connector) -> str:
    names = [a.name for a in connector.actions]
    return source_stub(connector.name, connector.description, "Actions", names, ACTIONS_LISTED)


def database_stub(database: DatabaseConnector) -> str:
    """`- sales: Sales data. Tables (30): a, …` (at most 10 table names, then the rest counted)."""
    return DERIVED.get(row_key(database, "stub"), lambda: _database_stub(database))


def _database_stub(database: DatabaseConnector) -> str:
    names = visible_table_names(database)
    return source_stub(database.name, database.description, "Tables", names, TABLES_LISTED)


def mcp_stub(server: McpServer) -> str:
    """`- github: GitHub. Tools (117): a, …` (at most 20 tool names, then the rest counted)."""
    return DERIVED.get(row_key(server, "stub"), lambda: _mcp_stub(server))


def _mcp_stub(server: McpServer) -> str:
    names = mcp_tool_names(server)
    return source_stub(server.name, server.description, "Tools", names, MCP_TOOLS_LISTED)
