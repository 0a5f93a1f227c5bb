"""delegation: agents' delegates and child runs

Revision ID: 0004_delegation
Revises: 0004_knowledge
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_delegation"
down_revision: str | None = "0004_knowledge"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUNNING = sa.text("status = 'running'")
_RUNNING_TOP = sa.text("status = 'running' AND parent_run_id IS NULL")


def upgrade() -> None:
    op.create_table(
        "agent_delegates",
        sa.Column("agent_id", sa.Uuid(), nullable=False),
        sa.Column("delegate_id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_delegates_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["delegate_id"],
            ["agents.id"],
            name=op.f("fk_agent_delegates_delegate_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "delegate_id", name=op.f("pk_agent_delegates")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_run_id", sa.Uuid(), nullable=True))
        batch_op.create_index(batch_op.f("ix_runs_parent_run_id"), ["parent_run_id"])
        batch_op.create_foreign_key(
            batch_op.f("fk_runs_parent_run_id_runs"),
            "runs",
            ["parent_run_id"],
            ["id"],
            ondelete="CASCADE",
        )
    # A delegation's child run shares its parent's conversation while both run.
    op.drop_index("uq_runs_running_conversation", table_name="runs")
    op.create_index(
        "uq_runs_running_conversation",
        "runs",
        ["conversation_id"],
        unique=True,
        postgresql_where=_RUNNING_TOP,
        sqlite_where=_RUNNING_TOP,
    )


def downgrade() -> None:
    op.drop_index("uq_runs_running_conversation", table_name="runs")
    op.execute("DELETE FROM runs WHERE parent_run_id IS NOT NULL")
    op.create_index(
        "uq_runs_running_conversation",
        "runs",
        ["conversation_id"],
        unique=True,
        postgresql_where=_RUNNING,
        sqlite_where=_RUNNING,
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_runs_parent_run_id_runs"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_runs_parent_run_id"))
        batch_op.drop_column("parent_run_id")
    op.drop_table("agent_delegates")
