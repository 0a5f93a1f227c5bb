from __future__ import annotations

from typing import Any

import pytest

from app.tools.validation import invalid_arguments, validate_arguments

META = {
    "type": "object",
    "properties": {
        "subcommand": {"type": "string", "enum": ["discover", "execute"]},
        "connector": {"type": "string", "enum": ["github", "jira"]},
        "parameters": {"type": "object"},
    },
    "required": ["subcommand", "connector"],
    "additionalProperties": False,
}
ACTION = {
    "type": "object",
    "properties": {
        "limit": {"type": "integer", "minimum": 1},
        "labels": {"type": "array", "items": {"type": "string"}},
        "owner": {"type": "string"},
    },
    "required": ["owner"],
}


@pytest.mark.parametrize(
    ("schema", "args", "at", "expected"),
    [
        (META, {"connector": "jira"}, "", "'subcommand' is a required property"),
        (
            META,
            {"subcommand": "discovr", "connector": "jira"},
            "",
            "subcommand: 'discovr' is not one of ['discover', 'execute']"
            " — did you mean 'discover'?",
        ),
        (
            META,
            {"subcommand": "discover", "connector": "jira", "extra": 1},
            "",
            "Additional properties are not allowed ('extra' was unexpected)",
        ),
        (
            ACTION,
            {"owner": "me", "limit": "x"},
            "parameters",
            "parameters.limit: 'x' is not of type 'integer'",
        ),
        (
            ACTION,
            {"owner": "me", "labels": ["a", 2]},
            "parameters",
            "parameters.labels[1]: 2 is not of type 'string'",
        ),
        (ACTION, {}, "parameters", "parameters: 'owner' is a required property"),
        (ACTION, {"owner": "me", "limit": 0}, "", "limit: 0 is less than the minimum of 1"),
    ],
)
def test_bad_arguments_name_the_field(
    schema: dict[str, Any], args: dict[str, Any], at: str, expected: str
) -> None:
    assert validate_arguments(schema, args, at=at) == expected


def test_valid_arguments_pass() -> None:
    assert validate_arguments(META, {"subcommand": "execute", "connector": "github"}) is None
    assert validate_arguments(ACTION, {"owner": "me", "limit": 3}) is None


def test_several_errors_are_listed_in_field_order() -> None:
    message = validate_arguments(ACTION, {"owner": 1, "limit": "x"})
    assert message == "limit: 'x' is not of type 'integer'; owner: 1 is not of type 'string'"


def test_many_errors_are_capped() -> None:
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in "abcde"}}
    message = validate_arguments(schema, dict.fromkeys("abcde", "x"))
    assert message is not None
    assert message.endswith("(and 2 more)")
    assert message.count("is not of type") == 3


def test_long_enum_is_summarised_with_a_suggestion() -> None:
    names = [f"table_{i}" for i in range(40)] + ["customers"]
    schema = {"type": "object", "properties": {"table": {"enum": names}}}
    message = validate_arguments(schema, {"table": "customer"})
    assert message == (
        "table: 'customer' is not one of the 41 known values — did you mean 'customers'?"
    )


def test_malformed_schema_does_not_raise() -> None:
    assert validate_arguments({"type": "no-such-type"}, {"a": 1}) is None


def test_empty_schema_accepts_anything() -> None:
    assert validate_arguments({}, {"anything": [1, 2]}) is None


def test_invalid_arguments_message_names_the_tool() -> None:
    assert invalid_arguments("connector", "'subcommand' is a required property") == (
        "Invalid arguments for 'connector': 'subcommand' is a required property"
    )
