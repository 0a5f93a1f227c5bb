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


class CheckedArguments(dict[str, Any]):
    """Arguments `check_arguments` accepted against the tool's schema: a back-end handed
    these trusts them and does not validate them again."""


def unknown_names(schema: dict[str, Any], args: Any) -> list[str]:
    """Top-level argument names a closed schema does not list (in the arguments' order).

    A schema is closed when it lists properties and does not allow additional ones, as a
    connector action's parameters: a misspelt name is refused, not sent.
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not props or schema.get("additionalProperties"):
        return []
    return [name for name in args if name not in props] if isinstance(args, dict) else []


def unknown_message(name: str, schema: dict[str, Any]) -> str:
    """`name: unknown parameter (did you mean …?); valid: …` for a name `unknown_names` found."""
    valid = sorted(schema.get("properties") or {})
    close = did_you_mean(name, valid)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{name}: unknown parameter{hint}; valid: {', '.join(valid)}"


def validate_arguments(
    schema: dict[str, Any], args: Any, *, at: str = "", closed: bool = False
) -> str | None:
    """None when `args` satisfy `schema`, else a short message naming each bad field.

    `at` prefixes field paths, e.g. `parameters` for the arguments nested in a meta-tool call;
    `closed` also refuses names the schema does not list (see `unknown_names`).
    """
    if not schema:
        return None
    try:
        errors = _ordered(compiled_validator(schema).iter_errors(args))
    except (SchemaError, UnknownType, Unresolvable):
        # A malformed schema from a remote server: let the server judge the arguments.
        return None
    messages = [_message(error, at) for error in errors[:_MAX_ERRORS]]
    if len(errors) > _MAX_ERRORS:
        messages.append(f"(and {len(errors) - _MAX_ERRORS} more)")
    if closed:
        prefix = f"{at}." if at else ""
        messages += [prefix + unknown_message(n, schema) for n in unknown_names(schema, args)]
    return "; ".join(messages) or None


def check_arguments(
    schema: dict[str, Any], args: Any, *, at: str = "", closed: bool = False
) -> CheckedArguments | str:
    """The one argument check of a tool call: the arguments, marked checked, or the message
    naming each bad field (`validate_arguments`)."""
    problem = validate_arguments(schema, args, at=at, closed=closed)
    if problem is not None:
        return problem
    return CheckedArguments(args if isinstance(args, dict) else {})


def invalid_arguments(tool: str, detail: str) -> str:
    return f"Invalid arguments for {tool!r}: {detail}"
