"""Imports point down the layer order written in docs/architecture.md, never up."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"

LAYERS: dict[str, int] = {
    **dict.fromkeys(("kit", "db", "config", "errors", "events"), 0),
    **dict.fromkeys(("security", "llm", "ops", "retrieval", "convert"), 1),
    "tools": 2,
    **dict.fromkeys(
        (
            "agents",
            "apikeys",
            "audit",
            "connectors",
            "conventions",
            "databases",
            "knowledge",
            "mcp",
            "oauth",
            "skills",
            "tenancy",
        ),
        3,
    ),
    **dict.fromkeys(("pipeline", "reasoning"), 4),
    **dict.fromkeys(("chat", "approvals"), 5),
    **dict.fromkeys(
        ("api", "main", "cli", "runtime", "deps", "ui", "migrations", "mcpserver", "openai_api"), 6
    ),
}


def _package(path: Path) -> str:
    return path.relative_to(APP).with_suffix("").parts[0]


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name.startswith("app.")]


def _modules() -> list[Path]:
    return [p for p in sorted(APP.rglob("*.py")) if p != APP / "__init__.py"]


def test_every_package_has_a_layer() -> None:
    unknown = sorted({_package(p) for p in _modules()} - LAYERS.keys())
    assert unknown == [], f"add these packages to the layer order: {unknown}"


def test_no_import_points_up() -> None:
    upward: list[str] = []
    for path in _modules():
        rel = path.relative_to(APP.parent).as_posix()
        source = LAYERS[_package(path)]
        for line, module in _imported(ast.parse(path.read_text(), filename=rel)):
            target = LAYERS.get(module.split(".")[1])
            if target is not None and target > source:
                upward.append(f"{rel}:{line} ({source}) imports {module} ({target})")
    assert upward == [], "imports from a lower layer to a higher one:\n" + "\n".join(upward)
