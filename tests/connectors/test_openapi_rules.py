"""Import rules on small documents: schemas function-calling APIs accept, parameter styles
and what cannot be honoured, security schemes, Swagger 2.0 conversion details."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from app.connectors.openapi import parse_openapi
from app.connectors.openapi_schema import json_schema


def doc(parameters: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": "op", "parameters": parameters or []}
    paths = extra.pop("paths", {"/items/{id}": {"get": op}})
    return {"openapi": "3.0.3", "servers": [{"url": "https://api.test"}], "paths": paths, **extra}


def test_openapi_only_keywords_become_plain_json_schema() -> None:
    converted = json_schema(
        {
            "type": "object",
            "nullable": True,
            "example": {"a": 1},
            "x-internal": True,
            "discriminator": {"propertyName": "kind"},
            "required": ["id", "name"],
            "properties": {
                "id": {"type": "string", "readOnly": True},
                "name": {"type": "string", "nullable": True, "enum": ["a", "b"]},
                "size": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                "either": {"oneOf": [{"type": "string"}], "nullable": True},
                "x-not-an-extension": {"type": "string", "description": "<p>a <b>b</b></p>"},
            },
        }
    )
    assert converted == {
        "type": ["object", "null"],
        "required": ["name"],
        "properties": {
            "name": {"type": ["string", "null"], "enum": ["a", "b", None]},
            "size": {"type": "integer", "exclusiveMinimum": 0},
            "either": {"oneOf": [{"type": "string"}, {"type": "null"}]},
            "x-not-an-extension": {"type": "string", "description": "a b"},
        },
    }
    jsonschema.Draft7Validator.check_schema(converted)
    jsonschema.Draft202012Validator.check_schema(converted)


def test_styles_are_recorded_and_what_cannot_be_honoured_is_a_warning() -> None:
    draft = parse_openapi(
        doc(
            [
                {"name": "id", "in": "path", "required": True, "style": "label"},
                {"name": "ids", "in": "query", "explode": False, "schema": {"type": "array"}},
                {"name": "f", "in": "query", "style": "deepObject", "explode": False},
                {"name": "tsv", "in": "query", "style": "tabDelimited"},
                {"name": "X-Multi", "in": "header", "style": "form"},
                {"name": "q", "in": "query", "content": {"application/json": {"schema": {}}}},
                {"name": "sid", "in": "cookie"},
            ]
        )
    )
    props = draft.actions[0].parameters["properties"]
    assert props["id"]["x-style"] == "label"
    assert props["ids"]["x-explode"] is False
    assert props["f"]["x-style"] == "deepObject"
    assert "x-style" not in props["tsv"]
    assert "x-style" not in props["X-Multi"]
    assert props["q"]["x-style"] == "json"
    at = "/paths/~1items~1{id}/get/parameters"
    assert draft.warnings == [
        f"{at}/2/explode: deepObject without explode is undefined; sent exploded",
        f"{at}/3/style: 'tabDelimited' is not supported for query parameters; sent as form",
        f"{at}/4/style: 'form' is not supported for header parameters; sent as simple",
        f"{at}/6: cookie parameter 'sid' skipped (not supported)",
    ]


def schemes(**defined: dict[str, Any]) -> dict[str, Any]:
    return {"securitySchemes": defined}


@pytest.mark.parametrize(
    ("components", "security", "keys", "expected", "warnings"),
    [
        (
            schemes(k={"type": "apiKey", "in": "query", "name": "key"}),
            None,
            (),
            ("api_key", {"query_param": "key"}),
            [],
        ),
        (
            schemes(
                a={"type": "apiKey", "in": "header", "name": "X-App"},
                b={"type": "apiKey", "in": "header", "name": "X-Key"},
            ),
            [{"a": [], "b": []}],
            (),
            ("api_key", {"header_name": "X-App"}),
            [
                "/security: a is required together with b; only a is sent",
            ],
        ),
        (
            schemes(
                c={"type": "apiKey", "in": "cookie", "name": "sid"},
                d={"type": "http", "scheme": "digest"},
            ),
            None,
            (),
            ("none", {}),
            [
                "/components/securitySchemes/c: API key in 'cookie' is not supported; skipped",
                "/components/securitySchemes/d: unsupported security scheme (http digest) skipped",
            ],
        ),
        (
            schemes(
                o={"type": "oauth2", "flows": {}},
                b={"type": "http", "scheme": "basic"},
            ),
            [{"o": []}, {"b": []}],
            ("username", "password"),
            ("basic", {}),
            [],
        ),
    ],
)
def test_security_schemes(
    components: dict[str, Any],
    security: list[dict[str, Any]] | None,
    keys: tuple[str, ...],
    expected: tuple[str, dict[str, Any]],
    warnings: list[str],
) -> None:
    document = doc(components=components)
    if security is not None:
        document["security"] = security
    draft = parse_openapi(document, credential_keys=keys)
    assert (draft.auth_type, draft.auth_config) == expected
    assert draft.warnings == warnings


def swagger(**ops: dict[str, Any]) -> dict[str, Any]:
    return {
        "swagger": "2.0",
        "host": "api.test",
        "schemes": ["http", "https"],
        "basePath": "/v2",
        "paths": {"/things": ops},
        "parameters": {"Limit": {"name": "limit", "in": "query", "type": "integer"}},
        "securityDefinitions": {"basic": {"type": "basic"}},
    }


def test_swagger2_collection_formats_shared_parameters_and_forms() -> None:
    draft = parse_openapi(
        swagger(
            get={
                "operationId": "list",
                "parameters": [
                    {"$ref": "#/parameters/Limit"},
                    {"name": "csv", "in": "query", "type": "array", "items": {"type": "string"}},
                    {"name": "multi", "in": "query", "type": "array", "collectionFormat": "multi"},
                    {"name": "pipes", "in": "query", "type": "array", "collectionFormat": "pipes"},
                    {"name": "tsv", "in": "query", "type": "array", "collectionFormat": "tsv"},
                    {"name": "maybe", "in": "query", "type": "string", "x-nullable": True},
                ],
            },
            post={
                "operationId": "create",
                "consumes": ["application/x-www-form-urlencoded"],
                "parameters": [
                    {"name": "name", "in": "formData", "type": "string", "required": True},
                    {
                        "name": "tags",
                        "in": "formData",
                        "type": "array",
                        "items": {"type": "string"},
                    },
                ],
            },
        )
    )
    assert (draft.base_url, draft.auth_type) == ("https://api.test/v2", "basic")
    actions = {a.name: a for a in draft.actions}
    props = actions["list"].parameters["properties"]
    assert props["limit"] == {"type": "integer", "x-location": "query"}
    assert props["csv"]["x-explode"] is False
    assert "x-explode" not in props["multi"]
    assert props["pipes"]["x-style"] == "pipeDelimited"
    assert props["maybe"]["type"] == ["string", "null"]
    assert draft.warnings == [
        "/paths/~1things/get/parameters/4/collectionFormat: tsv is not supported; "
        "sent comma-separated"
    ]
    create = actions["create"].parameters
    assert create["x-body-encoding"] == "form"
    assert create["required"] == ["name"]
    assert create["properties"]["tags"]["x-location"] == "body"
