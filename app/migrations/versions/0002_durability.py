"""durability: worker heartbeats, run ownership, one running run per conversation

Revision ID: 0002_durability
Revises: 0002_tenancy
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_durability"
down_revision: str | None = "0002_tenancy"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUNNING = sa.text("status = 'running'")


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    # Older versions could leave several runs `running` in one conversation: keep the newest.
    op.execute(
        "UPDATE runs SET status = 'failed' WHERE status = 'running' AND EXISTS "
        "(SELECT 1 FROM runs AS newer WHERE newer.conversation_id = runs.conversation_id "
        "AND newer.status = 'running' AND newer.created_at > runs.created_at)"
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("worker_id", sa.Uuid(), nullable=True))
    op.create_index(
        "uq_runs_running_conversation",
        "runs",
        ["conversation_id"],
        unique=True,
        postgresql_where=RUNNING,
        sqlite_where=RUNNING,
    )


def downgrade() -> None:
    op.drop_index("uq_runs_running_conversation", table_name="runs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("worker_id")
    op.drop_table("workers")
