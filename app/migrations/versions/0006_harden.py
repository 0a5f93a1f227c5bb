"""history outlives its resources: deleted_resources, and no cascade from agents to history

Conversations and runs keep their agent's id without a foreign key (deleting an agent no
longer deletes its conversations, runs and journals); a deleted agent, connector, database or
MCP server leaves its id, kind and name in `deleted_resources`. Downgrading removes the
history of agents that no longer exist (the foreign keys need their rows).

Revision ID: 0006_harden
Revises: 0005_tool_call_history
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_harden"
down_revision: str | None = "0006_skills"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUNNING_TOP = sa.text("status = 'running' AND parent_run_id IS NULL")


_GONE_CONVERSATIONS = "SELECT id FROM conversations WHERE agent_id NOT IN (SELECT id FROM agents)"
_GONE_RUNS = (
    "SELECT id FROM runs WHERE agent_id NOT IN (SELECT id FROM agents)"
    f" OR conversation_id IN ({_GONE_CONVERSATIONS})"
)
"""The history of agents that no longer exist (a downgrade's foreign keys need their rows)."""


def _running_index() -> None:
    op.create_index(
        "uq_runs_running_conversation",
        "runs",
        ["conversation_id"],
        unique=True,
        postgresql_where=_RUNNING_TOP,
        sqlite_where=_RUNNING_TOP,
    )


def upgrade() -> None:
    op.create_table(
        "deleted_resources",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deleted_resources")),
    )
    op.create_index(
        "ix_deleted_resources_kind_name", "deleted_resources", ["kind", "name"], unique=False
    )
    # SQLite rebuilds `runs` in batch mode: its partial index is dropped and made again.
    op.drop_index("uq_runs_running_conversation", table_name="runs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint("fk_runs_agent_id_agents", type_="foreignkey")
    _running_index()
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_constraint("fk_conversations_agent_id_agents", type_="foreignkey")


def downgrade() -> None:
    # Explicitly, children first: SQLite migrates with foreign keys off (no cascade).
    for statement in (
        f"DELETE FROM run_events WHERE run_id IN ({_GONE_RUNS})",
        f"DELETE FROM approvals WHERE run_id IN ({_GONE_RUNS})",
        f"DELETE FROM messages WHERE conversation_id IN ({_GONE_CONVERSATIONS})",
        f"DELETE FROM runs WHERE id IN ({_GONE_RUNS})",
        f"DELETE FROM conversations WHERE id IN ({_GONE_CONVERSATIONS})",
    ):
        op.execute(statement)
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.create_foreign_key(
            "fk_conversations_agent_id_agents", "agents", ["agent_id"], ["id"], ondelete="CASCADE"
        )
    op.drop_index("uq_runs_running_conversation", table_name="runs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_foreign_key(
            "fk_runs_agent_id_agents", "agents", ["agent_id"], ["id"], ondelete="CASCADE"
        )
    _running_index()
    op.drop_index("ix_deleted_resources_kind_name", table_name="deleted_resources")
    op.drop_table("deleted_resources")
