"""Connector actions: the schema the model sees, argument validation and request placement.

Locations: a property's `x-location` wins; otherwise `path` when the action's
path has that `{placeholder}`, `query` for GET/DELETE (and HEAD/OPTIONS), else `body`.

`action_parameters_schema()` strips `x-location` from the top-level properties (and the
schema's `x-body-encoding`): where a value goes is the executor's business, and the model
reads fewer tokens without it.

Body encodings: JSON unless the parameters schema says `"x-body-encoding": "form"`
(`application/x-www-form-urlencoded`) or `"multipart"` (`multipart/form-data`). Form fields
follow OpenAPI's defaults: a list repeats its key (`To=a&To=b`), an object is spelled out
deepObject-style (`metadata[order]=7`), booleans are `true`/`false`; a property marked
`"x-style": "deepObject"` (from the document's `encoding`) indexes its lists (`expand[0]=a`).
Path, query and header values follow their `x-style`/`x-explode` (see `params`).

See docs/contract.md §3.1.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
from jsonschema import exceptions as jsonschema_exceptions

from app.connectors.models import Connector, ConnectorAction
from app.connectors.params import (
    HINTS,
    SerializationError,
    Style,
    form_fields,
    header_value,
    path_value,
    query_pairs,
    text,
)
from app.tools.validation import (
    CheckedArguments,
    compiled_validator,
    unknown_message,
    unknown_names,
)

LOCATIONS = ("path", "query", "header", "body")

_QUERY_METHODS = frozenset({"GET", "DELETE", "HEAD", "OPTIONS"})
_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")
_TEMPLATE = re.compile(r"\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}")
_MAX_ERRORS = 5
_MISSING = object()
BODY_ENCODING = "x-body-encoding"
ENCODINGS = ("json", "form", "multipart")


ParameterError = SerializationError
"""Arguments cannot be turned into a request (message is safe to show the model)."""


@dataclass(kw_only=True)
class RequestParts:
    path: str
    query: list[str] = field(default_factory=list)
    """Encoded `key=value` fragments, in order (see `params.query_pairs`)."""
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    has_body: bool = False
    encoding: str = "json"
    """`json`, `form` or `multipart`: how `body` goes on the wire (see `encode_body`)."""
    deep: frozenset[str] = frozenset()
    """Body fields whose lists are indexed (`expand[0]=a`) instead of repeated."""
    files: frozenset[str] = frozenset()
    """Multipart fields sent as file parts (`format: binary`), named after the field."""


def _properties(action: ConnectorAction) -> dict[str, Any]:
    props = (action.parameters or {}).get("properties") or {}
    return props if isinstance(props, dict) else {}


def path_placeholders(path: str) -> list[str]:
    return _PLACEHOLDER.findall(path)


def action_parameters_schema(action: ConnectorAction) -> dict[str, Any]:
    """The JSON Schema the model receives for `action` (`x-location` removed)."""
    schema = copy.deepcopy(action.parameters or {})
    schema.pop(BODY_ENCODING, None)
    schema.pop("x-tags", None)
    schema.setdefault("type", "object")
    props = schema.setdefault("properties", {})
    if isinstance(props, dict):
        for prop in props.values():
            if isinstance(prop, dict):
                prop.pop("x-location", None)
                for hint in HINTS:
                    prop.pop(hint, None)
    return schema


def resolve_location(action: ConnectorAction, param_name: str) -> str:
    """Where `param_name` goes in the request: path, query, header or body."""
    prop = _properties(action).get(param_name)
    if isinstance(prop, dict) and prop.get("x-location") in LOCATIONS:
        return str(prop["x-location"])
    if param_name in path_placeholders(action.path or ""):
        return "path"
    if (action.method or "GET").upper() in _QUERY_METHODS:
        return "query"
    return "body"


def action_step(connector: Connector, action: ConnectorAction) -> str:
    """The progress-tracker step id of a call of `action` (the one place it is spelt)."""
    return f"connector:{connector.name}/{action.name}"


def check_action_arguments(
    action: ConnectorAction, arguments: Mapping[str, Any]
) -> CheckedArguments:
    """`arguments` as checked by the one validator (`app.tools.validation`: the compiled
    schema, and no name the schema does not list); already checked ones are trusted.

    Raises `ParameterError` listing what is wrong, for a caller that had not checked them.
    """
    if isinstance(arguments, CheckedArguments):
        return arguments
    schema = action.parameters or {"type": "object"}
    try:
        validator = compiled_validator(schema)
    except jsonschema_exceptions.SchemaError as exc:
        raise ParameterError(
            f"Action {action.name!r} has an invalid parameter schema: {exc.message}"
        ) from exc
    given = dict(arguments)
    problems = [_describe(err) for err in validator.iter_errors(given)]
    problems += [unknown_message(name, schema) for name in unknown_names(schema, given)]
    if problems:
        shown = "; ".join(sorted(problems)[:_MAX_ERRORS])
        more = f" (+{len(problems) - _MAX_ERRORS} more)" if len(problems) > _MAX_ERRORS else ""
        raise ParameterError(f"Invalid parameters for {action.name!r}: {shown}{more}")
    return CheckedArguments(given)


def _describe(err: Any) -> str:
    where = "/".join(str(p) for p in err.absolute_path) or "(root)"
    return f"{where}: {err.message}"


def build_request_parts(action: ConnectorAction, arguments: Mapping[str, Any]) -> RequestParts:
    """Place each argument by location and render the body template."""
    path = action.path or "/"
    parts = RequestParts(path=path)
    body: dict[str, Any] = {}
    props = _properties(action)
    for name, value in arguments.items():
        location = resolve_location(action, name)
        if value is None and location != "body":
            continue
        if location == "body":
            body[name] = value
            continue
        style = Style.of(props.get(name), location)
        if location == "path":
            parts.path = parts.path.replace("{" + name + "}", path_value(name, value, style))
        elif location == "query":
            parts.query += query_pairs(name, value, style)
        else:
            parts.headers[name] = header_value(name, value, style)
    missing = path_placeholders(parts.path)
    if missing:
        raise ParameterError(f"Missing path parameter(s) for {action.name!r}: {', '.join(missing)}")
    if action.body_template is not None:
        parts.body = render_template(action.body_template, arguments)
        parts.has_body = True
    elif body:
        parts.body = body
        parts.has_body = True
    encoding = (action.parameters or {}).get(BODY_ENCODING) or "json"
    parts.encoding = str(encoding) if encoding in ENCODINGS else "json"
    if parts.encoding != "json":
        parts.deep = _body_fields(action, lambda p: p.get("x-style") == "deepObject")
        parts.files = _body_fields(action, lambda p: p.get("format") == "binary")
    return parts


def _body_fields(action: ConnectorAction, test: Callable[[dict[str, Any]], bool]) -> frozenset[str]:
    """Body field names (as sent, after the template's renames) whose schema passes `test`."""
    params = {n for n, p in _properties(action).items() if isinstance(p, dict) and test(p)}
    if params and isinstance(action.body_template, dict):
        params |= {
            k
            for k, v in action.body_template.items()
            if isinstance(v, str) and v.strip("{} ") in params
        }
    return frozenset(params)


def encode_body(parts: RequestParts) -> tuple[bytes, str] | None:
    """(bytes, Content-Type) for a `form` or `multipart` body; None for JSON (or no body)."""
    if not parts.has_body or parts.encoding == "json":
        return None
    fields = form_fields(parts.body, deep=parts.deep)
    if parts.encoding == "form":
        return urlencode(fields).encode(), "application/x-www-form-urlencoded"
    files = [
        (k, (k, v.encode(), "application/octet-stream") if k in parts.files else (None, v))
        for k, v in fields
    ]
    request = httpx.Request("POST", "http://multipart.invalid/", files=files)
    return request.read(), request.headers["content-type"]


def render_template(template: Any, arguments: Mapping[str, Any]) -> Any:
    """Replace `{{param}}` in string leaves; a leaf that is exactly one placeholder keeps
    the value's JSON type, and is dropped from its object when the parameter is absent."""
    rendered = _render(template, arguments)
    return None if rendered is _MISSING else rendered


def _render(node: Any, arguments: Mapping[str, Any]) -> Any:
    if isinstance(node, str):
        whole = _TEMPLATE.fullmatch(node.strip())
        if whole:
            return _lookup(arguments, whole.group(1))
        return _TEMPLATE.sub(lambda m: text(_present(_lookup(arguments, m.group(1)))), node)
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            rendered = _render(value, arguments)
            if rendered is not _MISSING:
                out[key] = rendered
        return out
    if isinstance(node, list):
        return [_present(_render(item, arguments)) for item in node]
    return node


def _present(value: Any) -> Any:
    return None if value is _MISSING else value


def _lookup(arguments: Mapping[str, Any], dotted: str) -> Any:
    if dotted in arguments:
        return arguments[dotted]
    current: Any = arguments
    for part in dotted.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return _MISSING
        current = current[part]
    return current
