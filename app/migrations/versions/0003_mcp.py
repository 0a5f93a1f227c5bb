"""runs.kind: a chat run or an MCP session

Revision ID: 0003_mcp
Revises: 0003_console
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_mcp"
down_revision: str | None = "0003_console"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="chat")
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("kind")
