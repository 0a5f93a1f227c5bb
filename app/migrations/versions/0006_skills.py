"""skills: the rest of a skill's folder (`skill_files`) and its index on the skill

Revision ID: 0006_skills
Revises: 0005_tool_call_history
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006_skills"
down_revision: str | None = "0006_knowledge"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "file_index",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=False,
                server_default=sa.text("'[]'"),
            )
        )
    op.create_table(
        "skill_files",
        sa.Column("skill_id", sa.Uuid(), nullable=False),
        sa.Column("path", sa.String(length=512), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("media_type", sa.String(length=128), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("data", sa.LargeBinary(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["skill_id"],
            ["skills.id"],
            name=op.f("fk_skill_files_skill_id_skills"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_skill_files")),
        sa.UniqueConstraint("skill_id", "path", name=op.f("uq_skill_files_skill_id")),
    )
    with op.batch_alter_table("skill_files", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_skill_files_skill_id"), ["skill_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("skill_files", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_skill_files_skill_id"))
    op.drop_table("skill_files")
    with op.batch_alter_table("skills", schema=None) as batch_op:
        batch_op.drop_column("file_index")
