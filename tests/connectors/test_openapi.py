"""OpenAPI import: three public-style specs, every operation called on a real local server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.connectors.actions import action_parameters_schema, resolve_location
from app.connectors.execute import ConnectorExecutor
from app.connectors.models import Connector, ConnectorAction
from app.connectors.openapi import ConnectorDraft, parse_openapi, slug
from app.errors import Invalid
from app.tools.base import CallContext
from tests.connectors.server_app import LocalServer

SPECS = Path(__file__).with_name("specs")
CREDENTIALS = {"bearer": {"token": "tok-openapi-1234"}, "api_key": {"api_key": "key-openapi-5678"}}


def load(name: str) -> str:
    return (SPECS / name).read_text()


def sample(schema: Any, name: str) -> Any:
    """A value valid for `schema` (enough for the fixture specs)."""
    if not isinstance(schema, dict):
        return "x"
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "oneOf" in schema:
        return sample(schema["oneOf"][0], name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "integer":
        return 7
    if kind == "number":
        return 2.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [sample(schema.get("items", {}), name)]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: sample(v, k) for k, v in props.items() if not v.get("readOnly")}
    if schema.get("format") == "uuid":
        return str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    return f"v-{name}"


def rows(draft: ConnectorDraft, base_url: str) -> tuple[Connector, list[ConnectorAction]]:
    connector = Connector(
        id=uuid.uuid4(),
        name=draft.name,
        description=draft.description,
        base_url=base_url,
        auth_type=draft.auth_type,
        auth_config=draft.auth_config,
        credentials=CREDENTIALS.get(draft.auth_type),
        timeout_s=5.0,
    )
    actions = [ConnectorAction(id=uuid.uuid4(), **a.model_dump()) for a in draft.actions]
    return connector, actions


def expected_path(action: ConnectorAction, args: dict[str, Any]) -> str:
    path = action.path
    for key, value in args.items():
        path = path.replace("{" + key + "}", str(value))
    return path


# --- the three fixture specs -------------------------------------------------------------


def test_petstore_yaml_imports_all_operations() -> None:
    draft = parse_openapi(load("petstore3.yaml"), base_url="https://petstore3.swagger.io/api/v3")
    assert (draft.name, draft.base_url, draft.auth_type) == (
        "swagger_petstore_openapi_3_0",
        "https://petstore3.swagger.io/api/v3",
        "bearer",
    )
    assert [a.name for a in draft.actions] == [
        "update_pet",
        "add_pet",
        "find_pets_by_status",
        "find_pets_by_tags",
        "get_pet_by_id",
        "update_pet_with_form",
        "delete_pet",
        "upload_file",
        "get_inventory",
        "place_order",
        "get_order_by_id",
        "delete_order",
        "create_user",
        "create_users_with_list_input",
        "login_user",
        "logout_user",
        "get_user_by_name",
        "update_user",
        "delete_user",
    ]
    assert draft.warnings == [
        "/paths/~1pet~1{petId}~1uploadImage/post/requestBody: media types "
        "application/octet-stream not supported; skipped",
        "/security: imported as bearer (petstore_auth); the document also offers api_key "
        "(api_key): pass auth_type (or matching credentials) to choose",
        "/components/securitySchemes/petstore_auth: oauth2 imported as bearer; store an access "
        "token as credentials",
    ]
    add_pet = next(a for a in draft.actions if a.name == "add_pet")
    assert add_pet.parameters["required"] == ["name", "photoUrls"]
    assert add_pet.parameters["properties"]["category"] == {
        "type": "object",
        "x-location": "body",
        "properties": {"id": {"type": "integer", "format": "int64"}, "name": {"type": "string"}},
    }


def test_relative_server_url_needs_a_base_url() -> None:
    with pytest.raises(Invalid) as caught:
        parse_openapi(load("petstore3.yaml"))
    assert caught.value.message == (
        "/servers/0/url: '/api/v3' is not an absolute http(s) URL; pass base_url"
    )


def test_openapi_31_json_with_refs_and_security() -> None:
    draft = parse_openapi(json.loads(load("train_travel_3_1.json")), name="trains")
    assert (draft.name, draft.base_url, draft.auth_type, draft.auth_config) == (
        "trains",
        "https://api.example.com",
        "bearer",
        {"token_prefix": "Bearer"},
    )
    by_name = {a.name: a for a in draft.actions}
    assert sorted(by_name) == [
        "create_booking",
        "create_booking_payment",
        "delete_booking",
        "get_booking",
        "get_bookings",
        "get_stations",
        "get_trips",
    ]
    trips = by_name["get_trips"].parameters
    assert trips["required"] == ["origin", "destination", "date"]
    assert trips["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 10,
        "description": "The number of items to return per page",
        "x-location": "query",
    }
    booking = by_name["create_booking"].parameters
    assert "id" not in booking["properties"]  # readOnly
    assert booking["properties"]["notes"]["type"] == ["string", "null"]
    payment = by_name["create_booking_payment"].parameters["properties"]["source"]
    assert payment["oneOf"][0]["title"] == "Card"  # nested $ref inlined


def test_api_key_in_query_spec_with_server_variables() -> None:
    draft = parse_openapi(load("openweathermap.json"))
    assert (draft.base_url, draft.auth_type, draft.auth_config) == (
        "https://api.openweathermap.org/data/2.5",
        "api_key",
        {"query_param": "appid"},
    )
    assert [a.name for a in draft.actions] == [
        "current_weather_data",
        "get_forecast",
        "find_cities_in_circle",
        "weather_for_several_city_ids",
    ]


@pytest.mark.parametrize(
    ("spec", "prefix"),
    [
        ("petstore3.yaml", "/api/v3"),
        ("train_travel_3_1.json", ""),
        ("openweathermap.json", ""),
    ],
)
async def test_every_imported_operation_is_callable(
    executor: ConnectorExecutor, server: LocalServer, spec: str, prefix: str
) -> None:
    draft = parse_openapi(load(spec), base_url=server.url + prefix)
    connector, actions = rows(draft, server.url + prefix)
    secret = next(iter(CREDENTIALS[draft.auth_type].values()))
    for action in actions:
        props = action.parameters["properties"]
        args = {name: sample(schema, name) for name, schema in props.items()}
        result = await executor.execute(connector, action, args, CallContext(run_id="imp"))
        assert result.ok, (action.name, result.error)
        assert secret not in result.output
        seen = server.last
        assert (seen["method"], seen["path"]) == (
            action.method,
            prefix + expected_path(action, args),
        ), action.name
        query = dict(seen["query"])
        for name in props:
            where = resolve_location(action, name)
            if where == "query" and not isinstance(args[name], list):
                value = args[name]
                wire = str(value).lower() if isinstance(value, bool) else str(value)
                assert query[name] == wire, (action.name, name)
            elif where == "query":
                repeated = [v for k, v in seen["query"] if k == name]
                assert repeated == [str(v) for v in args[name]], (action.name, name)
            elif where == "header":
                assert seen["headers"][name.lower()] == str(args[name])
            elif where == "body" and action.body_template is None:
                assert seen["body"][name] == args[name], (action.name, name)
        if draft.auth_type == "bearer":
            assert seen["headers"]["authorization"] == f"Bearer {secret}"
        else:
            assert query["appid"] == secret


async def test_imported_bodies_arrive_as_the_api_expects(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    draft = parse_openapi(load("petstore3.yaml"), base_url=server.url)
    connector, actions = rows(draft, server.url)
    by_name = {a.name: a for a in actions}
    users = [{"username": "ada"}, {"username": "bob"}]
    assert (
        await executor.execute(
            connector, by_name["create_users_with_list_input"], {"body": users}, CallContext()
        )
    ).ok
    assert server.last["body"] == users
    update = by_name["update_user"]  # path `username` and body `username` both survive
    assert update.parameters["properties"]["body_username"]["x-location"] == "body"
    assert (
        await executor.execute(
            connector,
            update,
            {"username": "old", "body_username": "new", "phone": "1"},
            CallContext(),
        )
    ).ok
    assert (server.last["path"], server.last["body"]) == (
        "/user/old",
        {"username": "new", "phone": "1"},
    )


def test_model_schema_hides_locations() -> None:
    draft = parse_openapi(load("openweathermap.json"))
    _, actions = rows(draft, "https://example.com")
    schema = action_parameters_schema(actions[0])
    assert "x-location" not in json.dumps(schema)
    assert "x-location" in json.dumps(actions[0].parameters)  # stored row untouched


# --- refs, cycles, names --------------------------------------------------------------


def _doc(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "T"},
        "servers": [{"url": "https://t.test"}],
        "paths": paths,
        **extra,
    }


def test_recursive_schemas_are_cut_not_followed_forever() -> None:
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
        },
    }
    doc = _doc(
        {
            "/trees": {
                "post": {
                    "requestBody": {
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                        }
                    },
                    "responses": {},
                }
            }
        },
        components={"schemas": {"Node": node}},
    )
    (action,) = parse_openapi(doc).actions
    assert action.name == "post_trees"
    assert action.parameters["properties"]["children"]["items"] == {
        "description": "(recursive: #/components/schemas/Node)"
    }


def test_parameter_ref_cycles_are_reported() -> None:
    doc = _doc(
        {"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/p1"}]}}},
        components={
            "parameters": {
                "p1": {"$ref": "#/components/parameters/p2"},
                "p2": {"$ref": "#/components/parameters/p1"},
            }
        },
    )
    with pytest.raises(Invalid, match=r"^/paths/~1a/get/parameters/0: \$ref cycle "):
        parse_openapi(doc)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            _doc({"/pets": {"get": {"responses": []}}}),
            "/paths/~1pets/get/responses: expected an object, got list",
        ),
        (
            _doc({"/pets": {"get": {"parameters": [{"$ref": "#/components/parameters/nope"}]}}}),
            "/paths/~1pets/get/parameters/0: $ref '#/components/parameters/nope' does not resolve",
        ),
        (
            _doc({"/pets": {"get": {"parameters": [{"$ref": "other.yaml#/x"}]}}}),
            "/paths/~1pets/get/parameters/0: only local $refs ('#/...') are supported, got "
            "'other.yaml#/x'",
        ),
        (
            _doc({"/pets": {"get": {"parameters": [{"name": "q", "in": "body"}]}}}),
            "/paths/~1pets/get/parameters/0/in: must be path, query, header or cookie, got 'body'",
        ),
        (
            _doc({"/pets": {"get": {"parameters": [{"in": "query"}]}}}),
            "/paths/~1pets/get/parameters/0/name: a parameter needs a name",
        ),
        (_doc({"/pets": {"get": "nope"}}), "/paths/~1pets/get: expected an object, got str"),
        (_doc({"pets": {"get": {}}}), "/paths/pets: path must start with '/'"),
        (_doc({}), "/paths: the document defines no operations"),
        (
            {"swagger": "2.0", "host": "api.test", "paths": {}},
            "/paths: the document defines no operations",
        ),
        ({"swagger": "1.2"}, "/swagger: unsupported version '1.2' (Swagger 2.0 only)"),
        (
            {"swagger": "2.0", "basePath": "/v1", "paths": {"/a": {"get": {}}}},
            "/servers/0/url: '/v1' is not an absolute http(s) URL; pass base_url",
        ),
        ({"openapi": "4.0.0"}, "/openapi: unsupported version '4.0.0' (3.0 and 3.1 only)"),
        ({"info": {}}, "/openapi: missing; expected an OpenAPI 3.0/3.1 or Swagger 2.0 document"),
        (
            {"openapi": "3.0.0", "paths": {"/a": {"get": {}}}},
            "/servers: no server URL in the document; pass base_url",
        ),
        (
            _doc({"/a": {"get": {}}}, components={"securitySchemes": {"k": {"in": "header"}}}),
            "/components/securitySchemes/k: security scheme has no 'type'",
        ),
    ],
)
def test_bad_documents_name_the_json_pointer(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse_openapi(doc)
    assert caught.value.message == message


def test_text_input_accepts_json_and_yaml_and_rejects_garbage() -> None:
    doc = _doc({"/a": {"get": {"operationId": "list all the things!"}}})
    assert parse_openapi(json.dumps(doc)).actions[0].name == "list_all_the_things"
    assert parse_openapi(yaml.safe_dump(doc)).actions[0].name == "list_all_the_things"
    with pytest.raises(Invalid, match=r"^/: not valid JSON or YAML \("):
        parse_openapi("openapi: [3.0\n  paths: {")
    with pytest.raises(Invalid, match=r"^/: expected an OpenAPI document"):
        parse_openapi("- just\n- a list\n")


def test_action_names_are_sanitised_and_unique() -> None:
    long_id = "Op" + "x" * 80
    doc = _doc(
        {
            "/a": {"get": {"operationId": long_id}, "post": {"operationId": long_id}},
            "/b/{id}": {"delete": {}},
        }
    )
    names = [a.name for a in parse_openapi(doc).actions]
    assert names == ["op" + "x" * 62, "op" + "x" * 60 + "_2", "delete_b_id"]
    assert all(len(n) <= 64 for n in names)
    assert slug("findPetsByIDs") == "find_pets_by_ids"


def test_undeclared_path_placeholders_become_parameters() -> None:
    (action,) = parse_openapi(_doc({"/repos/{owner}/{repo}": {"get": {}}})).actions
    assert action.parameters == {
        "type": "object",
        "properties": {
            "owner": {"type": "string", "x-location": "path"},
            "repo": {"type": "string", "x-location": "path"},
        },
        "required": ["owner", "repo"],
    }
