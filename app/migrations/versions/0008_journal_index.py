"""the journal keeps one index on `run_id`: the unique (run_id, seq)

`ix_run_events_run_id` repeated the leading column of `uq_run_events_run_id`, which serves every
lookup by run (replay, the foreign key's cascade); every journal write paid for both.

Revision ID: 0008_journal_index
Revises: 0007_lease
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008_journal_index"
down_revision: str | None = "0007_lease"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_events_run_id"))


def downgrade() -> None:
    with op.batch_alter_table("run_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_events_run_id"), ["run_id"], unique=False)
