"""OpenAPI parameter and body schemas → what function-calling APIs accept, and how each
parameter is serialized.

`json_schema()` turns an (already `$ref`-inlined) OpenAPI Schema Object into plain JSON
Schema: `nullable: true` becomes a type list (`["string", "null"]`, `null` added to an
`enum`, `{"type": "null"}` to an `anyOf`/`oneOf`); OpenAPI 3.0's boolean
`exclusiveMinimum`/`exclusiveMaximum` become numbers; `readOnly` properties leave request
objects; OpenAPI-only keywords (`nullable`, `example`, `discriminator`, `xml`,
`externalDocs`, `readOnly`, `writeOnly`, `deprecated`, `x-*`) are dropped; HTML in
descriptions becomes plain text.

`parameter_hints()` records a parameter's `style`, `explode`, `allowReserved` and
GitHub's `x-multi-segment` for the executor (`params`), and warns about what it cannot
honour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.connectors.params import (
    ALLOW_RESERVED,
    EXPLODE,
    JSON,
    MULTI_SEGMENT,
    STYLE,
    STYLES,
    default_style,
)
from app.convert.plain import plain_text

_DROPPED = frozenset(
    {
        "nullable",
        "example",
        "discriminator",
        "xml",
        "externalDocs",
        "readOnly",
        "writeOnly",
        "deprecated",
    }
)
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def json_schema(node: Any) -> Any:
    """Plain JSON Schema from an OpenAPI Schema Object (see the module docstring)."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or (isinstance(key, str) and key.startswith("x-")):
            continue
        if key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {
                name: json_schema(sub)
                for name, sub in value.items()
                if not (key == "properties" and isinstance(sub, dict) and sub.get("readOnly"))
            }
        elif key == "description" and isinstance(value, str):
            out[key] = plain_text(value)
        elif key == "examples" and not isinstance(value, list):
            continue
        else:
            out[key] = json_schema(value)
    _exclusive(node, out, "exclusiveMinimum", "minimum")
    _exclusive(node, out, "exclusiveMaximum", "maximum")
    if isinstance(out.get("required"), list) and isinstance(node.get("properties"), dict):
        gone = {
            k for k, v in node["properties"].items() if isinstance(v, dict) and v.get("readOnly")
        }
        if gone:
            out["required"] = [r for r in out["required"] if r not in gone]
            if not out["required"]:
                del out["required"]
    if node.get("nullable") is True:
        _allow_null(out)
    return out


def _exclusive(node: Mapping[str, Any], out: dict[str, Any], key: str, bound: str) -> None:
    flag = node.get(key)
    if not isinstance(flag, bool):
        return
    del out[key]
    if flag and bound in out:
        out[key] = out.pop(bound)


def _allow_null(out: dict[str, Any]) -> None:
    kind = out.get("type")
    if isinstance(kind, str) and kind != "null":
        out["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        out["type"] = [*kind, "null"]
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    if kind is None:
        for combiner in ("anyOf", "oneOf"):
            if isinstance(out.get(combiner), list):
                out[combiner] = [*out[combiner], {"type": "null"}]
                break


def parameter_hints(
    param: Mapping[str, Any], where: str, at: str, warnings: list[str]
) -> dict[str, Any]:
    """`x-style`/`x-explode`/`x-multi-segment`/`x-allow-reserved` for one parameter; only
    what differs from the defaults is recorded."""
    hints: dict[str, Any] = {}
    if param.get("schema") is None and isinstance(param.get("content"), dict):
        hints[STYLE] = JSON
        return hints
    style = param.get("style")
    default = default_style(where)
    if style is not None and style not in STYLES[where]:
        warnings.append(
            f"{at}/style: {style!r} is not supported for {where} parameters; sent as {default}"
        )
        style = None
    resolved = str(style or default)
    if resolved != default:
        hints[STYLE] = resolved
    explode = param.get("explode")
    if isinstance(explode, bool) and resolved != "deepObject" and explode != (resolved == "form"):
        hints[EXPLODE] = explode
    if explode is False and resolved == "deepObject":
        warnings.append(f"{at}/explode: deepObject without explode is undefined; sent exploded")
    if where == "path" and (param.get("x-multi-segment") or param.get("allowReserved")):
        hints[MULTI_SEGMENT] = True
    elif where == "query" and param.get("allowReserved"):
        hints[ALLOW_RESERVED] = True
    return hints
