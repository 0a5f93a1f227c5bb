"""knowledge documents from files and URLs: ingestion status, its failure reason, the URL a
document was fetched from, and the size of what was sent

Revision ID: 0006_knowledge
Revises: 0005_tool_call_history
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_knowledge"
down_revision: str | None = "0005_tool_call_history"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("knowledge_documents", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("status", sa.String(length=16), server_default="ready", nullable=False)
        )
        batch_op.add_column(sa.Column("error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("source_url", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("size_bytes", sa.BigInteger(), server_default="0", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("knowledge_documents", schema=None) as batch_op:
        batch_op.drop_column("size_bytes")
        batch_op.drop_column("source_url")
        batch_op.drop_column("error")
        batch_op.drop_column("status")
