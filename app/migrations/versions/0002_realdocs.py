"""skills keep the other SKILL.md front-matter keys

Revision ID: 0002_realdocs
Revises: 0002_durability
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_realdocs"
down_revision: str | None = "0002_durability"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("skills") as batch:
        batch.add_column(
            sa.Column(
                "front_matter",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=False,
                server_default=sa.text("'{}'"),
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("skills") as batch:
        batch.drop_column("front_matter")
