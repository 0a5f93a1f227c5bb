"""Loading an OpenAPI document, JSON pointers and local `$ref` resolution."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import yaml

from app.errors import Invalid

_MAX_DEPTH = 24
_MAX_DESCRIPTION = 1000


def pointer(*parts: str | int) -> str:
    """A JSON pointer (RFC 6901) from unescaped parts."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def load(document: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(document, str):
        try:
            loaded: Any = json.loads(document)
        except ValueError:
            try:
                loaded = yaml.safe_load(document)
            except yaml.YAMLError as exc:
                raise Invalid(f"/: not valid JSON or YAML ({_yaml_where(exc)})") from exc
        document = loaded
    if not isinstance(document, dict):
        raise Invalid("/: expected an OpenAPI document (an object)")
    return document


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "syntax error"
    return f"{problem} at line {mark.line + 1}" if mark is not None else str(problem)


def check_version(doc: Mapping[str, Any]) -> None:
    if "swagger" in doc:
        raise Invalid("/swagger: Swagger 2.0 documents are not supported; convert to OpenAPI 3")
    version = doc.get("openapi")
    if version is None:
        raise Invalid("/openapi: missing; expected an OpenAPI 3.0 or 3.1 document")
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
    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc

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

    def schema(self, node: Any, at: str, stack: tuple[str, ...] = ()) -> Any:
        """Inline every `$ref` in a schema; cycles become a described any-schema."""
        if len(stack) > _MAX_DEPTH:
            return {}
        if isinstance(node, dict):
            if "$ref" in node:
                ref = node["$ref"]
                if ref in stack:
                    return {"description": f"(recursive: {ref})"}
                target = self.schema(self.lookup(ref, at), at, (*stack, ref))
                extra = {k: self.schema(v, at, stack) for k, v in node.items() if k != "$ref"}
                return {**target, **extra} if isinstance(target, dict) else target
            return {k: self.schema(v, at, stack) for k, v in node.items()}
        if isinstance(node, list):
            return [self.schema(item, at, stack) for item in node]
        return node
