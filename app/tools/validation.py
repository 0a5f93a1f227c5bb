"""Tool arguments are checked against the tool's JSON Schema before anything runs.

See docs/contract.md §4.3.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import SchemaError, UnknownType, ValidationError, relevance
from referencing.exceptions import Unresolvable

from app.tools.suggest import did_you_mean

_MAX_ERRORS = 3


def _path(error: ValidationError, at: str) -> str:
    parts: list[str] = [at] if at else []
    for part in error.absolute_path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(f".{part}" if parts else str(part))
    return "".join(parts)


def _message(error: ValidationError, at: str) -> str:
    text = error.message
    if error.validator == "enum" and isinstance(error.instance, str):
        options = [str(v) for v in error.validator_value if isinstance(v, str)]
        close = did_you_mean(error.instance, options)
        if len(options) > 20:
            text = f"{error.instance!r} is not one of the {len(options)} known values"
        if close:
            text += f" — did you mean {close[0]!r}?"
    path = _path(error, at)
    return f"{path}: {text}" if path else text


def _ordered(errors: Iterable[ValidationError]) -> list[ValidationError]:
    return sorted(errors, key=lambda e: (list(map(str, e.absolute_path)), relevance(e)))


@lru_cache(maxsize=512)
def _compiled(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def compiled_validator(schema: dict[str, Any]) -> Any:
    """The validator for `schema` (its `$schema` dialect, default 2020-12), compiled once.

    Raises `jsonschema.exceptions.SchemaError` when the schema itself is invalid.
    """
    return _compiled(json.dumps(schema, sort_keys=True, default=str))


def validate_arguments(schema: dict[str, Any], args: Any, *, at: str = "") -> str | None:
    """None when `args` satisfy `schema`, else a short message naming each bad field.

    `at` prefixes field paths, e.g. `parameters` for the arguments nested in a meta-tool call.
    """
    if not schema:
        return None
    try:
        errors = _ordered(compiled_validator(schema).iter_errors(args))
    except (SchemaError, UnknownType, Unresolvable):
        # A malformed schema from a remote server: let the server judge the arguments.
        return None
    if not errors:
        return None
    messages = [_message(error, at) for error in errors[:_MAX_ERRORS]]
    if len(errors) > _MAX_ERRORS:
        messages.append(f"(and {len(errors) - _MAX_ERRORS} more)")
    return "; ".join(messages)


def invalid_arguments(tool: str, detail: str) -> str:
    return f"Invalid arguments for {tool!r}: {detail}"
