"""The SQL corpora (tests/databases/corpus/*.yaml) as pytest parameters."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ALL_DIALECTS = ("postgresql", "mysql", "sqlite")
CORPUS_DIR = Path(__file__).parent / "corpus"


@dataclass(frozen=True)
class Case:
    id: str
    sql: str
    dialects: tuple[str, ...]
    reason: str | None = None
    rows: int | None = None


def load(name: str) -> list[Case]:
    raw: list[dict[str, Any]] = yaml.safe_load((CORPUS_DIR / name).read_text("utf-8"))
    return [
        Case(
            id=str(e["id"]),
            sql=str(e["sql"]),
            dialects=tuple(e.get("dialects", ALL_DIALECTS)),
            reason=e.get("reason"),
            rows=e.get("rows"),
        )
        for e in raw
    ]


ADVERSARIAL = load("adversarial.yaml")
LEGITIMATE = load("legitimate.yaml")


def params(cases: list[Case]) -> list[Any]:
    """One pytest param per (dialect, case)."""
    return [
        pytest.param(dialect, case, id=f"{dialect}-{case.id}")
        for case in cases
        for dialect in case.dialects
    ]


def for_dialect(cases: list[Case], dialect: str) -> list[Case]:
    return [c for c in cases if dialect in c.dialects]
