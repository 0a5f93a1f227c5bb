"""Form and multipart bodies: what the import records and what goes on the wire."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import httpx

from app.connectors.actions import action_parameters_schema
from app.connectors.execute import ConnectorExecutor
from app.connectors.openapi import parse_openapi
from app.tools.base import CallContext
from tests.connectors.conftest import make_action, make_connector
from tests.connectors.server_app import LocalServer
from tests.fixtures.crud import check_rejected


def upload_document() -> dict[str, Any]:
    fields = {
        "type": "object",
        "required": ["file"],
        "properties": {
            "file": {"type": "string", "format": "binary"},
            "purpose": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Uploads"},
        "servers": [{"url": "https://up.test"}],
        "paths": {
            "/files": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {"content": {"multipart/form-data": {"schema": fields}}},
                }
            }
        },
    }


async def test_multipart_binary_fields_go_as_file_parts(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    (draft,) = parse_openapi(upload_document()).actions
    assert draft.parameters["x-body-encoding"] == "multipart"
    assert draft.parameters["required"] == ["file"]
    action = make_action("upload", method="POST", path="/files", parameters=draft.parameters)
    assert "x-body-encoding" not in action_parameters_schema(action)
    args = {"file": "col1,col2\n1,2\n", "purpose": "import", "tags": ["a", "b"]}
    result = await executor.execute(make_connector(server.url), action, args, CallContext())
    assert result.ok, result.error
    body = server.last["body"]
    assert server.last["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    assert 'name="file"; filename="file"\r\nContent-Type: application/octet-stream' in body
    assert "col1,col2\r\n1,2\r\n" in body or "col1,col2\n1,2\n" in body
    assert body.count('form-data; name="tags"') == 2


async def test_form_body_of_a_hand_made_action(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    params = {
        "type": "object",
        "x-body-encoding": "form",
        "properties": {
            "q": {"type": "string", "x-location": "query"},
            "name": {"type": "string"},
            "meta": {"type": "object"},
            "n": {"type": "integer"},
        },
    }
    action = make_action("form", method="POST", path="/form", parameters=params)
    args = {"q": "x", "name": "Ada Lovelace", "meta": {"k": {"deep": True}}, "n": 3}
    result = await executor.execute(make_connector(server.url), action, args, CallContext())
    assert result.ok, result.error
    assert server.last["query"] == [["q", "x"]]
    assert parse_qsl(server.last["body"]) == [
        ("name", "Ada Lovelace"),
        ("meta[k][deep]", "true"),
        ("n", "3"),
    ]


async def test_an_unknown_body_encoding_is_refused(client: httpx.AsyncClient) -> None:
    body = {
        "name": "svc",
        "base_url": "https://svc.test",
        "actions": [
            {
                "name": "a",
                "method": "POST",
                "path": "/a",
                "parameters": {"type": "object", "x-body-encoding": "xml", "properties": {}},
            }
        ],
    }
    await check_rejected(
        client,
        "/api/v1/connectors",
        body,
        mentions=["x-body-encoding"],
        list_path="/api/v1/connectors",
    )
