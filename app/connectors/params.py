"""OpenAPI parameter serialization: `style` and `explode` for path, query and header values.

An imported action records, on each parameter's schema, what differs from OpenAPI's defaults:
`x-style` (path `simple|label|matrix`, query `form|spaceDelimited|pipeDelimited|deepObject`,
header `simple`; `json` for a parameter described by `content`), `x-explode` (default: true
for `form`, false otherwise),
`x-multi-segment` (a path value may hold `/`: GitHub's `x-multi-segment`, OpenAPI's
`allowReserved`) and `x-allow-reserved` (a query value keeps RFC 3986 reserved characters).
A hand-written action without them gets the defaults: path `simple`, query `form` exploded
(a list repeats its key, an object becomes `key=value` pairs), header `simple`.

Values are percent-encoded here and the query string is assembled here (delimiters and
deepObject brackets stay literal: `created[gt]=1700000000`, `ids=1,2,3`), so the wire is what
the document describes. A path value is one segment: `/`, `\\`, `.` and `..` are refused;
a multi-segment value keeps its slashes and each segment is checked and encoded on its own.

No maintained Python library serializes client-side parameters on its own: `openapi-core`
only deserializes on the server side, and `aiopenapi3` serializes inside its own client
(it models the whole document first). This module is the one implementation, shared by form
bodies (`form_fields`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

STYLE = "x-style"
EXPLODE = "x-explode"
MULTI_SEGMENT = "x-multi-segment"
ALLOW_RESERVED = "x-allow-reserved"
HINTS = (STYLE, EXPLODE, MULTI_SEGMENT, ALLOW_RESERVED)
"""Schema keys this module reads; stripped from what the model sees."""

STYLES: dict[str, tuple[str, ...]] = {
    "path": ("simple", "label", "matrix"),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
}
JSON = "json"
"""The style of a parameter described by `content`: its value travels as JSON text."""
_RESERVED = ":/?[]@!$'()*+,;"
"""RFC 3986 reserved characters an `allowReserved` query value keeps (not `&`, `=`, `#`)."""
_DELIMITERS = {"spaceDelimited": "%20", "pipeDelimited": "|"}


class SerializationError(ValueError):
    """A value cannot be placed as the parameter's style says (message safe to show)."""


def default_style(location: str) -> str:
    return "form" if location == "query" else "simple"


@dataclass(frozen=True, kw_only=True)
class Style:
    style: str
    explode: bool
    multi_segment: bool = False
    allow_reserved: bool = False

    @classmethod
    def of(cls, prop: Any, location: str) -> Style:
        """The serialization a parameter schema asks for (defaults where it says nothing)."""
        hints = prop if isinstance(prop, Mapping) else {}
        style = str(hints.get(STYLE) or default_style(location))
        if style != JSON and style not in STYLES.get(location, ()):
            style = default_style(location)
        explode = hints.get(EXPLODE)
        return cls(
            style=style,
            explode=bool(explode) if explode is not None else style == "form",
            multi_segment=bool(hints.get(MULTI_SEGMENT)),
            allow_reserved=bool(hints.get(ALLOW_RESERVED)),
        )


def text(value: Any) -> str:
    """A scalar as it travels: booleans `true`/`false`, nested structures as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _items(value: Any, explode: bool, pair: str) -> list[str]:
    """An array's items, or an object's `k,v` (or, exploded, `k=v`) pieces, as text."""
    if isinstance(value, list):
        return [text(v) for v in value if v is not None]
    if isinstance(value, Mapping):
        pieces: list[str] = []
        for k, v in value.items():
            if v is None:
                continue
            pieces += [f"{k}{pair}{text(v)}"] if explode else [str(k), text(v)]
        return pieces
    return [text(value)]


# --- path -------------------------------------------------------------------------------


def path_value(name: str, value: Any, style: Style) -> str:
    """The encoded text that replaces `{name}` in the path."""
    if style.style == JSON:
        value = text(value)
    enc = _segment_encoder(name, style.multi_segment)
    if style.style == "matrix":
        if isinstance(value, Mapping) and style.explode:
            return "".join(f";{enc(k)}={enc(v)}" for k, v in _pairs(value))
        pieces = [enc(p) for p in _items(value, False, "=")]
        label = quote(name, safe="")
        if isinstance(value, list) and style.explode:
            return "".join(f";{label}={p}" for p in pieces)
        return f";{label}=" + ",".join(pieces) if pieces else f";{label}"
    if isinstance(value, Mapping) and style.explode:
        pieces = [f"{enc(k)}={enc(v)}" for k, v in _pairs(value)]
    else:
        pieces = [enc(p) for p in _items(value, False, "=")]
    if style.style == "label":
        return "." + ("." if style.explode else ",").join(pieces)
    joined = ",".join(pieces)
    if not joined:
        raise SerializationError(_segment_rule(name, style.multi_segment))
    return joined


def _pairs(value: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), text(v)) for k, v in value.items() if v is not None]


def _segment_encoder(name: str, multi: bool) -> Any:
    def encode(piece: str) -> str:
        segments = piece.split("/") if multi else [piece]
        if "\\" in piece or (not multi and "/" in piece):
            raise SerializationError(_segment_rule(name, multi))
        if any(s in ("", ".", "..") for s in segments):
            raise SerializationError(_segment_rule(name, multi))
        return "/".join(quote(s, safe="") for s in segments)

    return encode


def _segment_rule(name: str, multi: bool) -> str:
    if multi:
        return (
            f"Path parameter {name!r} must be a non-empty path of segments separated by '/' "
            "(no empty, '.' or '..' segment, no '\\')"
        )
    return (
        f"Path parameter {name!r} must be a non-empty segment without '/' or '\\' "
        "(and not '.' or '..')"
    )


# --- query ------------------------------------------------------------------------------


def query_pairs(name: str, value: Any, style: Style) -> list[str]:
    """Encoded `key=value` fragments of one query parameter, in order."""
    safe = _RESERVED if style.allow_reserved else ""

    def val(v: str) -> str:
        return quote(v, safe=safe)

    key = quote(name, safe="")
    if style.style == JSON:
        return [f"{key}={val(text(value))}"]
    if style.style == "deepObject":
        return [
            f"{quote(k, safe='[]')}={val(v)}"
            for k, v in form_fields({name: value}, deep=frozenset({name}))
        ]
    if not isinstance(value, (list, Mapping)):
        return [f"{key}={val(text(value))}"]
    if style.explode:
        if isinstance(value, Mapping):
            return [f"{quote(k, safe='')}={val(v)}" for k, v in _pairs(value)]
        return [f"{key}={val(text(v))}" for v in value if v is not None]
    delimiter = _DELIMITERS.get(style.style, ",")
    return [f"{key}=" + delimiter.join(val(p) for p in _items(value, False, "="))]


def merge_query(fragments: list[str], auth: Mapping[str, str]) -> list[str]:
    """The action's fragments plus the connector's API key parameter, which wins a clash."""
    if not auth:
        return fragments
    keys = tuple(f"{quote(k, safe='')}=" for k in auth)
    kept = [f for f in fragments if not f.startswith(keys)]
    return kept + [f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in auth.items()]


def with_query(url: str, fragments: list[str]) -> str:
    if not fragments:
        return url
    return url + ("&" if "?" in url else "?") + "&".join(fragments)


# --- header -----------------------------------------------------------------------------


def header_value(name: str, value: Any, style: Style) -> str:
    joined = text(value) if style.style == JSON else ",".join(_items(value, style.explode, "="))
    if "\r" in joined or "\n" in joined:
        raise SerializationError(f"Header parameter {name!r} must not contain line breaks")
    return joined


# --- form fields (query deepObject and form bodies) ----------------------------------


def form_fields(
    body: Any, prefix: str = "", *, deep: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    """Flatten a value into form fields: lists repeat the key (indexed `k[0]` inside objects
    and for `deep` fields), objects nest as `k[sub]`. A top-level (`prefix`-less) value must
    be an object of fields."""
    if body is None:
        return []
    if not isinstance(body, Mapping):
        if not prefix:
            raise SerializationError("A form body must be an object of fields")
        return [(prefix, text(body))]
    fields: list[tuple[str, str]] = []
    for key, value in body.items():
        name = f"{prefix}[{key}]" if prefix else str(key)
        if value is None:
            continue
        if isinstance(value, list):
            indexed = bool(prefix) or key in deep
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    fields += form_fields(item, f"{name}[{index}]")
                else:
                    fields.append((f"{name}[{index}]" if indexed else name, text(item)))
        elif isinstance(value, Mapping):
            fields += form_fields(value, name)
        else:
            fields.append((name, text(value)))
    return fields
