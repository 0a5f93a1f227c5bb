"""Parameter locations, model-facing schemas, body templates and the breaker/redactor."""

from __future__ import annotations

import base64

import pytest

from app.connectors.actions import (
    ParameterError,
    action_parameters_schema,
    build_request_parts,
    render_template,
    resolve_location,
)
from app.connectors.auth import Redactor, build_auth
from app.connectors.breaker import CircuitBreaker
from tests.connectors.conftest import make_action, make_connector

PARAMS = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "q": {"type": "string"},
        "h": {"type": "string", "x-location": "header"},
        "b": {"type": "string", "x-location": "body"},
    },
}


@pytest.mark.parametrize(
    ("method", "name", "expected"),
    [
        ("GET", "id", "path"),
        ("GET", "q", "query"),
        ("DELETE", "q", "query"),
        ("POST", "q", "body"),
        ("PUT", "q", "body"),
        ("PATCH", "q", "body"),
        ("GET", "h", "header"),
        ("GET", "b", "body"),
        ("POST", "undeclared", "body"),
    ],
)
def test_location_rules(method: str, name: str, expected: str) -> None:
    action = make_action(method=method, path="/things/{id}", parameters=PARAMS)
    assert resolve_location(action, name) == expected


def test_model_schema_strips_x_location_only() -> None:
    action = make_action(parameters={**PARAMS, "required": ["id"]})
    schema = action_parameters_schema(action)
    assert schema == {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {"type": "string"},
            "q": {"type": "string"},
            "h": {"type": "string"},
            "b": {"type": "string"},
        },
    }
    assert action.parameters["properties"]["h"]["x-location"] == "header"


def test_path_values_are_percent_encoded() -> None:
    action = make_action(path="/things/{id}", parameters=PARAMS)
    assert build_request_parts(action, {"id": "a?b#c %"}).path == "/things/a%3Fb%23c%20%25"


def test_missing_path_parameter_is_named() -> None:
    action = make_action(path="/things/{id}/{other}", parameters=PARAMS)
    with pytest.raises(ParameterError, match=r"Missing path parameter\(s\) for 'act': other"):
        build_request_parts(action, {"id": "1"})


def test_header_values_cannot_smuggle_lines() -> None:
    with pytest.raises(ParameterError, match="must not contain line breaks"):
        build_request_parts(make_action(parameters=PARAMS), {"h": "a\r\nX-Evil: 1"})


def test_templates_render_whole_values_partials_and_dotted_lookups() -> None:
    template = {
        "n": "{{ count }}",
        "s": "n={{count}}, who={{user.name}}",
        "u": "{{user}}",
        "gone": "{{missing}}",
        "list": ["{{missing}}", "{{flag}}"],
        "fixed": 3,
    }
    args = {"count": 2, "flag": False, "user": {"name": "ada"}}
    assert render_template(template, args) == {
        "n": 2,
        "s": "n=2, who=ada",
        "u": {"name": "ada"},
        "list": [None, False],
        "fixed": 3,
    }
    assert render_template("{{body}}", {"body": [1, 2]}) == [1, 2]


def test_breaker_cycle_with_a_controlled_clock() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=2, cooldown_s=10, clock=lambda: now[0])
    breaker.record_failure()
    assert breaker.allow()
    breaker.record_failure()
    assert (breaker.state, breaker.allow(), breaker.retry_after()) == ("open", False, 10)
    now[0] = 10.0
    assert breaker.state == "half_open"
    assert breaker.allow()  # the single trial
    assert not breaker.allow()  # others wait for it
    breaker.record_success()
    assert (breaker.state, breaker.failures) == ("closed", 0)


def test_redactor_masks_credentials_their_encodings_and_secret_keys() -> None:
    connector = make_connector(
        "https://x.test",
        auth_type="basic",
        credentials={"username": "svc-user", "password": "pa55word!"},
    )
    auth = build_auth(connector)
    redactor = Redactor.for_connector(connector, auth)
    encoded = base64.b64encode(b"svc-user:pa55word!").decode()
    assert redactor.text(f"echo {encoded} and pa55word!") == "echo *** and ***"
    assert redactor.arguments(
        {"api_key": "k", "nested": [{"Token": "t", "ok": "pa55word!"}], "n": 1}
    ) == {"api_key": "***", "nested": [{"Token": "***", "ok": "***"}], "n": 1}
