"""Run Alembic migrations programmatically (CLI `quiver migrate`, `serve`, tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from app.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def alembic_config(settings: Settings) -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.attributes["settings"] = settings
    return cfg


def upgrade(settings: Settings, revision: str = "head") -> None:
    if settings.is_sqlite:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(settings), revision)


def downgrade(settings: Settings, revision: str = "base") -> None:
    command.downgrade(alembic_config(settings), revision)
