"""`/openapi.json` declares what the service returns (errors in the `{error, detail}` shape, the
bearer scheme) and `/docs` works offline: Swagger UI's assets are served by the app itself."""

from __future__ import annotations

import re
from typing import Any

import httpx
import jsonschema

ERROR_REF = "#/components/schemas/Error"
METHODS = {"get", "post", "put", "patch", "delete"}


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if method in METHODS
    ]


async def test_every_error_status_uses_the_error_schema(anon_client: httpx.AsyncClient) -> None:
    doc = (await anon_client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas
    assert schemas["Error"]["required"] == ["error", "detail"]
    operations = _operations(doc)
    assert len(operations) > 40
    for path, method, op in operations:
        where = f"{method.upper()} {path}"
        openai = path.startswith("/v1/")  # OpenAI's error shape; its 400 for bad input
        expected = "#/components/schemas/OpenAIError" if openai else ERROR_REF
        for status, response in op["responses"].items():
            if status[0] in "45":
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": expected}, (where, status)
                assert response["description"] != "Validation Error", where
        declared = set(op["responses"])
        assert ("400" if openai else "422") in declared, where
        if path.startswith(("/api/", "/v1/")):
            assert {"401", "403"} <= declared, where
            assert op["security"] == [{"bearerAuth": []}], where
        if "requestBody" in op:
            assert "413" in declared, where
        if "{" in path:
            assert "404" in declared, where


async def test_bearer_scheme_is_declared(anon_client: httpx.AsyncClient) -> None:
    doc = (await anon_client.get("/openapi.json")).json()
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    assert "security" not in doc["paths"]["/healthz"]["get"]


async def test_returned_errors_match_the_declared_schema(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    error_schema = doc["components"]["schemas"]["Error"]
    answers = [
        await client.get("/api/v1/agents", params={"limit": "x"}),
        await client.post(
            "/api/v1/skills", content=b"{", headers={"content-type": "application/json"}
        ),
        await client.get("/api/v1/skills/00000000-0000-0000-0000-000000000000"),
        await client.get("/api/v1/agents", headers={"Authorization": "Bearer nope"}),
    ]
    assert [a.status_code for a in answers] == [422, 422, 404, 401]
    for answer in answers:
        jsonschema.validate(answer.json(), error_schema)


async def test_docs_reference_only_local_assets_and_they_are_served(
    anon_client: httpx.AsyncClient,
) -> None:
    page = await anon_client.get("/docs")
    assert page.status_code == 200
    html = page.text
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert "/docs/init.js" in urls  # the start-up script: no inline code on the page
    init = (await anon_client.get("/docs/init.js")).text
    urls += re.findall(r"""url:\s*["']([^"']+)["']""", init)
    assert "/docs/assets/swagger-ui-bundle.js" in urls
    assert "/docs/assets/swagger-ui.css" in urls
    assert "/openapi.json" in urls
    assert "://" not in html
    assert "<script>" not in html
    for url in urls:
        assert url.startswith("/"), url
        assert not url.startswith("//"), url
        asset = await anon_client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 100, url
    js = await anon_client.get("/docs/assets/swagger-ui-bundle.js")
    assert "javascript" in js.headers["content-type"]
    assert len(js.content) > 500_000  # the real bundle, not a stub
    redirect = await anon_client.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200
    assert "/docs/assets/oauth2-redirect.js" in redirect.text
    for answer in (page, redirect):
        assert answer.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert (await anon_client.get("/redoc")).status_code == 404  # it would load from a CDN
