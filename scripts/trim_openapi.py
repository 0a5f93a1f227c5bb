"""Trim an OpenAPI description to a few operations, for small test fixtures.

Run: `python scripts/trim_openapi.py IN.json[.gz] OUT.json.gz 'GET /user' 'POST /gists' ...`
Keeps the named operations (and their paths' shared parameters), `info`, `servers`, security
and the components those operations reach through `$ref` (transitively); drops the rest.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            out.add(ref)
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def _resolve(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def trim(doc: dict[str, Any], operations: list[str]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for op in operations:
        method, path = op.split(" ", 1)
        item = doc["paths"][path]
        kept = paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        kept[method.lower()] = item[method.lower()]
    out = {k: doc[k] for k in ("openapi", "info", "servers", "security") if k in doc}
    out["paths"] = paths
    seen: set[str] = set()
    todo: set[str] = set()
    _refs(paths, todo)
    schemes = doc.get("components", {}).get("securitySchemes")
    components: dict[str, Any] = {"securitySchemes": schemes} if schemes else {}
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        target = _resolve(doc, ref)
        _, _, kind, name = ref.split("/", 3)
        components.setdefault(kind, {})[name] = target
        _refs(target, todo)
    out["components"] = components
    return out


def main() -> None:
    src, dst, *ops = sys.argv[1:]
    raw = Path(src).read_bytes()
    doc = json.loads(gzip.decompress(raw) if src.endswith(".gz") else raw)
    Path(dst).write_bytes(gzip.compress(json.dumps(trim(doc, ops)).encode(), mtime=0))


if __name__ == "__main__":
    main()
