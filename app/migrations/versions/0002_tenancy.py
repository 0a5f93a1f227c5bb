"""tenancy: owners of conversations and runs, key limits, run starts, tool-call audit

Revision ID: 0002_tenancy
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_tenancy"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _owner_columns(table: str) -> None:
    with op.batch_alter_table(table, schema=None) as batch_op:
        batch_op.add_column(sa.Column("api_key_id", sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column("user", sa.String(length=256), nullable=True))
        batch_op.create_index(batch_op.f(f"ix_{table}_api_key_id"), ["api_key_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f(f"fk_{table}_api_key_id_api_keys"),
            "api_keys",
            ["api_key_id"],
            ["id"],
            ondelete="SET NULL",
        )


def _drop_owner_columns(table: str) -> None:
    with op.batch_alter_table(table, schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f(f"fk_{table}_api_key_id_api_keys"), type_="foreignkey")
        batch_op.drop_index(batch_op.f(f"ix_{table}_api_key_id"))
        batch_op.drop_column("user")
        batch_op.drop_column("api_key_id")


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_ids", _JSON, nullable=True))
        batch_op.add_column(sa.Column("rate_limit_per_minute", sa.Integer(), nullable=True))
    _owner_columns("conversations")
    _owner_columns("runs")
    op.create_table(
        "run_starts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("api_key_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["api_key_id"],
            ["api_keys.id"],
            name=op.f("fk_run_starts_api_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_starts")),
    )
    with op.batch_alter_table("run_starts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_starts_api_key_id"), ["api_key_id"], unique=False)
    op.create_table(
        "tool_calls",
        sa.Column("run_id", sa.Uuid(), nullable=True),
        sa.Column("api_key_id", sa.Uuid(), nullable=True),
        sa.Column("user", sa.String(length=256), nullable=True),
        sa.Column("agent_id", sa.Uuid(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("target", sa.String(length=256), nullable=True),
        sa.Column("arguments", _JSON, nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_calls")),
    )
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        for column in ("run_id", "api_key_id", "kind", "name", "created_at"):
            batch_op.create_index(batch_op.f(f"ix_tool_calls_{column}"), [column], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        for column in ("run_id", "api_key_id", "kind", "name", "created_at"):
            batch_op.drop_index(batch_op.f(f"ix_tool_calls_{column}"))
    op.drop_table("tool_calls")
    with op.batch_alter_table("run_starts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_starts_api_key_id"))
    op.drop_table("run_starts")
    _drop_owner_columns("runs")
    _drop_owner_columns("conversations")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("rate_limit_per_minute")
        batch_op.drop_column("agent_ids")
