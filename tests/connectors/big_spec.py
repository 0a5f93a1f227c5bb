"""A generated OpenAPI document of any size: `n` operations over shared components (path and
query parameters, a JSON body by `$ref`), shaped like a large real API."""

from __future__ import annotations

from typing import Any

_METHODS = ("get", "post", "patch", "delete")


def big_document(operations: int) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for i in range(operations):
        resource, method = divmod(i, len(_METHODS))
        item = paths.setdefault(
            f"/projects/{{project}}/things{resource}/{{id}}",
            {
                "parameters": [
                    {"$ref": "#/components/parameters/project"},
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                ],
            },
        )
        op: dict[str, Any] = {
            "operationId": f"{_METHODS[method]}Thing{resource}",
            "tags": [f"group{resource % 50}"],
            "summary": f"{_METHODS[method].title()} thing {resource}",
            "parameters": [{"$ref": "#/components/parameters/fields"}],
            "responses": {"200": {"description": "OK"}},
        }
        if _METHODS[method] in ("post", "patch"):
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}},
            }
        item[_METHODS[method]] = op
    return {
        "openapi": "3.0.3",
        "info": {"title": f"Big API ({operations} operations)", "version": "1"},
        "servers": [{"url": "https://big.example.test/v1"}],
        "security": [{"token": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "parameters": {
                "project": {
                    "name": "project",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                },
                "fields": {
                    "name": "fields",
                    "in": "query",
                    "description": "Fields to return",
                    "schema": {"type": "array", "items": {"type": "string"}},
                },
            },
            "schemas": {
                "Thing": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "id": {"type": "integer", "readOnly": True},
                        "name": {"type": "string", "maxLength": 200},
                        "labels": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Label"},
                        },
                        "owner": {"$ref": "#/components/schemas/User"},
                    },
                },
                "Label": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "color": {"type": "string"}},
                },
                "User": {
                    "type": "object",
                    "properties": {"login": {"type": "string"}, "id": {"type": "integer"}},
                },
            },
        },
    }
