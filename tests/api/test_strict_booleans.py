"""Every boolean in a JSON request body is strict: `true`/`false` only, never `0`, `1` or
`"yes"` (schemathesis found `requires_confirmation: 0` accepted as false)."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError

from app.agents.config import AgentConfig
from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN, SECRET_KEY


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def _has_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_has_bool(arg) for arg in typing.get_args(annotation))
    return False


def _api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)  # an included router
        if included is not None:
            yield from _api_routes(included.routes)


def _bool_fields() -> list[tuple[str, Any]]:
    """(model.field, its annotation) of every boolean in a JSON request body's models."""
    app = create_app(Settings(secret_keys=[SECRET_KEY], admin_token=ADMIN_TOKEN))
    pending: list[type[BaseModel]] = [AgentConfig]  # `model_config_json`, validated on write
    for route in _api_routes(app.routes):
        for param in route.dependant.body_params:
            pending.extend(_models(param.field_info.annotation))
    seen: set[type[BaseModel]] = set()
    found: list[tuple[str, Any]] = []
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            annotation = field.annotation
            if _has_bool(annotation):
                found.append(
                    (
                        f"{model.__name__}.{name}",
                        typing.Annotated[annotation, *field.metadata]
                        if field.metadata
                        else annotation,
                    )
                )
            pending.extend(_models(annotation))
    return found


FIELDS = _bool_fields()


def test_request_bodies_have_booleans() -> None:
    names = {name for name, _ in FIELDS}
    assert {
        "ActionCreate.requires_confirmation",
        "DatabaseCreate.read_only",
        "ToolProfile.require_verified",
    } <= names, names


@pytest.mark.parametrize(("name", "annotation"), FIELDS, ids=[name for name, _ in FIELDS])
@pytest.mark.parametrize("value", [0, 1, "true", "no"])
def test_a_boolean_field_takes_only_true_or_false(
    name: str, annotation: Any, value: object
) -> None:
    adapter = TypeAdapter(annotation)
    assert adapter.validate_python(True) is True
    with pytest.raises(ValidationError):
        adapter.validate_python(value)


async def test_a_number_for_a_boolean_is_a_422_naming_the_field(
    client: httpx.AsyncClient,
) -> None:
    created = await client.post(
        "/api/v1/connectors",
        json={
            "name": "strictness",
            "base_url": "https://example.com",
            "actions": [{"name": "a", "method": "GET", "path": "/a", "requires_confirmation": 0}],
        },
    )
    assert created.status_code == 422, created.text
    assert "requires_confirmation" in created.json()["detail"]
