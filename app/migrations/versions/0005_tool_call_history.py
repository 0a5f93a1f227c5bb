"""tool-call history: an index for an agent's most recent tool calls (the co-use prior)

Revision ID: 0005_tool_call_history
Revises: 0004_delegation
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005_tool_call_history"
down_revision: str | None = "0004_delegation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.create_index(
            "ix_tool_calls_agent_id_created_at", ["agent_id", "created_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_index("ix_tool_calls_agent_id_created_at")
