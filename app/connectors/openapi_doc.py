"""Loading an OpenAPI document, JSON pointers and local `$ref` resolution.

Expansion is bounded: a document (after YAML aliases are followed) and every operation's
inlined schemas may hold at most `MAX_NODES` nodes and nest at most `MAX_NESTING` levels, so
a `$ref` bomb or a YAML alias bomb (a few KB that expand to billions of nodes) is refused
with a 422 after a fraction of a second instead of eating the CPU and memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import yaml

from app.errors import Invalid

_MAX_DEPTH = 24
_MAX_DESCRIPTION = 1000
MAX_NODES = 100_000
"""Nodes one operation's parameters and body may expand to (largest real ones: ~1.5k)."""
MAX_TOTAL_NODES = 2_000_000
"""Nodes all operations together may expand to (GitHub's 1,223: ~23k; 10,000 generated: ~230k):
one big schema shared by thousands of operations is a bomb too."""
MAX_DOCUMENT_NODES = 5_000_000
"""Nodes a whole document may hold once YAML aliases are followed (GitHub's: ~260k)."""
MAX_NESTING = 128


def pointer(*parts: str | int) -> str:
    """A JSON pointer (RFC 6901) from unescaped parts."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def load(document: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(document, str):
        try:
            loaded: Any = json.loads(document)
        except RecursionError as exc:
            raise Invalid(f"/: nested deeper than {MAX_NESTING} levels") from exc
        except ValueError:
            try:
                loaded = yaml.safe_load(document)
            except RecursionError as exc:
                raise Invalid(f"/: nested deeper than {MAX_NESTING} levels") from exc
            except yaml.YAMLError as exc:
                raise Invalid(f"/: not valid JSON or YAML ({_yaml_where(exc)})") from exc
            # YAML aliases share nodes: count the document as it reads when expanded
            measure(loaded)
        document = loaded
    if not isinstance(document, dict):
        raise Invalid("/: expected an OpenAPI document (an object)")
    return document


def measure(node: Any, *, max_nodes: int = MAX_DOCUMENT_NODES) -> int:
    """Nodes in `node` counted as expanded (a shared subtree counts each time it is reached);
    `Invalid` past `max_nodes` or `MAX_NESTING` levels. Shared subtrees (YAML aliases) are
    measured once, so a bomb is refused in time proportional to its text, not its expansion.
    """
    seen: dict[int, tuple[int, int]] = {}

    def walk(current: Any, depth: int) -> tuple[int, int]:
        """(expanded size, height) of `current`."""
        if not isinstance(current, (dict, list)):
            return 1, 0
        known = seen.get(id(current))
        if known is None:
            if depth > MAX_NESTING:
                raise Invalid(f"/: nested deeper than {MAX_NESTING} levels")
            children = current.values() if isinstance(current, dict) else current
            size, height = 1, 0
            for child in children:
                child_size, child_height = walk(child, depth + 1)
                size += child_size
                height = max(height, child_height + 1)
                if size > max_nodes:
                    raise Invalid(
                        f"/: the document expands to more than {max_nodes} nodes "
                        "(YAML aliases?); refused"
                    )
            known = seen[id(current)] = (size, height)
        if depth + known[1] > MAX_NESTING:
            raise Invalid(f"/: nested deeper than {MAX_NESTING} levels")
        return known

    return walk(node, 0)[0]


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "syntax error"
    return f"{problem} at line {mark.line + 1}" if mark is not None else str(problem)


def check_version(doc: Mapping[str, Any]) -> None:
    version = doc.get("openapi")
    if version is None:
        raise Invalid("/openapi: missing; expected an OpenAPI 3.0/3.1 or Swagger 2.0 document")
    if not str(version).startswith(("3.0", "3.1")):
        raise Invalid(f"/openapi: unsupported version {str(version)!r} (3.0 and 3.1 only)")


def mapping(value: Any, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(f"{at}: expected an object, got {type(value).__name__}")
    return value


def short_text(value: Any, *, limit: int = _MAX_DESCRIPTION) -> str:
    flat = " ".join(str(value).split()) if value else ""
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --- $ref resolution --------------------------------------------------------------------


class Refs:
    """Resolves local `$ref`s; `schema()` inlines them within a node budget per operation."""

    def __init__(self, doc: dict[str, Any], *, max_nodes: int = MAX_NODES) -> None:
        self._doc = doc
        self.max_nodes = max_nodes
        self.nodes = 0
        self.total = 0

    def reset(self) -> None:
        """Start the node budget of the next operation."""
        self.total += self.nodes
        self.nodes = 0

    def lookup(self, ref: Any, at: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise Invalid(f"{at}: only local $refs ('#/...') are supported, got {ref!r}")
        node: Any = self._doc
        for raw in ref[1:].split("/")[1:]:
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise Invalid(f"{at}: $ref {ref!r} does not resolve")
        return node

    def shallow(self, node: Any, at: str) -> Any:
        """Follow `$ref` chains at the top of `node` (siblings override, as in 3.1)."""
        seen: list[str] = []
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise Invalid(f"{at}: $ref cycle {' -> '.join([*seen, ref])}")
            seen.append(ref)
            target = self.lookup(ref, at)
            extra = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **extra} if extra and isinstance(target, dict) else target
        return node

    def schema(self, node: Any, at: str, stack: tuple[str, ...] = (), depth: int = 0) -> Any:
        """Inline every `$ref` in a schema; cycles become a described any-schema."""
        if len(stack) > _MAX_DEPTH:
            return {}
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise Invalid(
                f"{at}: schemas expand to more than {self.max_nodes} nodes ($ref bomb?); refused"
            )
        if self.total + self.nodes > MAX_TOTAL_NODES:
            raise Invalid(
                f"{at}: the operations' schemas expand to more than "
                f"{MAX_TOTAL_NODES} nodes in all ($ref bomb?); refused"
            )
        if depth > MAX_NESTING:
            raise Invalid(f"{at}: schema nested deeper than {MAX_NESTING} levels")
        if isinstance(node, dict):
            if "$ref" in node:
                ref = node["$ref"]
                if ref in stack:
                    return {"description": f"(recursive: {ref})"}
                target = self.schema(self.lookup(ref, at), at, (*stack, ref), depth + 1)
                extra = {
                    k: self.schema(v, at, stack, depth + 1) for k, v in node.items() if k != "$ref"
                }
                return {**target, **extra} if isinstance(target, dict) else target
            return {k: self.schema(v, at, stack, depth + 1) for k, v in node.items()}
        if isinstance(node, list):
            return [self.schema(item, at, stack, depth + 1) for item in node]
        return node


def parameter_list(
    raw: Any, at: str, refs: Refs, places: Sequence[str]
) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """A `parameters` list: (name, in) → (pointer, parameter object), `$ref`s followed, in
    document order; `in` must be one of `places` (OpenAPI 3's, or Swagger 2.0's)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise Invalid(f"{at}: expected a list")
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for i, item in enumerate(raw):
        p_at = f"{at}/{i}"
        param = mapping(refs.shallow(item, p_at), p_at)
        name, where = param.get("name"), param.get("in")
        if not isinstance(name, str) or not name:
            raise Invalid(f"{p_at}/name: a parameter needs a name")
        if not isinstance(where, str) or where not in places:
            listed = ", ".join(places[:-1]) + " or " + places[-1]
            raise Invalid(f"{p_at}/in: must be {listed}, got {where!r}")
        found[(name, where)] = (p_at, param)
    return found
