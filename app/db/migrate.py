"""Run Alembic migrations programmatically (CLI `quiver migrate`, `serve`, tests).

The migration scripts ship inside the package (`app/migrations`), so an installed (non-editable)
Quiver finds them exactly like a source checkout does; no `alembic.ini` is needed at run time.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from app.config import Settings

MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"


def alembic_config(settings: Settings) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["settings"] = settings.direct()  # never through a transaction pooler
    return cfg


def upgrade(settings: Settings, revision: str = "head") -> None:
    if settings.is_sqlite:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(settings), revision)


def downgrade(settings: Settings, revision: str = "base") -> None:
    command.downgrade(alembic_config(settings), revision)
