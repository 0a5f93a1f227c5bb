"""Send what the document says: real descriptions (GitHub, Stripe, a Swagger 2.0 one; see
tests/data/README.md) imported through HTTP, their actions executed against the recording
server on 127.0.0.1, and the exact wire checked (raw path, raw query, body, auth header)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.connectors.server_app import LocalServer
from tests.connectors.test_real_documents import IMPORT, text, unique

SWAGGER2 = Path(__file__).resolve().parents[1] / "data" / "openapi" / "visiblethread_swagger2.yaml"


async def call(
    client: httpx.AsyncClient, cid: str, action: str, args: dict[str, Any]
) -> dict[str, Any]:
    resp = await client.post(
        f"/api/v1/connectors/{cid}/actions/{action}/test", json={"parameters": args}
    )
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = resp.json()
    return result


async def imported(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post(IMPORT, json=body)
    assert resp.status_code == 201, resp.text
    created: dict[str, Any] = resp.json()
    return created


# --- GitHub: multi-segment path parameters ----------------------------------------------


async def test_github_file_paths_and_refs_keep_their_slashes(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    body = await imported(
        loopback_client,
        document=text("github_api"),
        name=unique("gh-files"),
        base_url=server.url,
        include_operations=[
            "repos/get-content",
            "repos/create-or-update-file-contents",
            "git/get-ref",
            "repos/compare-commits-with-basehead",
            "issues/update",
        ],
        auth_type="bearer",
        auth_config={"token_prefix": "token"},
        credentials={"token": "ghp-wire-5678"},
    )
    cid = body["id"]
    assert body["warnings"] == []

    ok = await call(
        loopback_client,
        cid,
        "repos_get_content",
        {"owner": "octo", "repo": "hello", "path": "docs/README.md", "ref": "main"},
    )
    assert ok["ok"] is True, ok
    seen = server.last
    assert (seen["method"], seen["raw_path"], seen["raw_query"]) == (
        "GET",
        "/repos/octo/hello/contents/docs/README.md",
        "ref=main",
    )
    assert seen["headers"]["authorization"] == "token ghp-wire-5678"

    await call(
        loopback_client,
        cid,
        "repos_get_content",
        {"owner": "octo", "repo": "hello", "path": "docs/My File é#1.md"},
    )
    assert server.last["raw_path"] == "/repos/octo/hello/contents/docs/My%20File%20%C3%A9%231.md"

    await call(
        loopback_client, cid, "git_get_ref", {"owner": "octo", "repo": "hello", "ref": "heads/main"}
    )
    assert server.last["raw_path"] == "/repos/octo/hello/git/ref/heads/main"

    await call(
        loopback_client,
        cid,
        "repos_compare_commits_with_basehead",
        {"owner": "octo", "repo": "hello", "basehead": "main...feature/x"},
    )
    assert server.last["raw_path"] == "/repos/octo/hello/compare/main...feature/x"

    put = await call(
        loopback_client,
        cid,
        "repos_create_or_update_file_contents",
        {
            "owner": "octo",
            "repo": "hello",
            "path": "docs/new.md",
            "message": "Add",
            "content": "SGk=",
        },
    )
    assert put["ok"] is True, put
    seen = server.last
    assert (seen["method"], seen["raw_path"]) == ("PUT", "/repos/octo/hello/contents/docs/new.md")
    assert seen["body"] == {"message": "Add", "content": "SGk="}

    before = len(server.log)
    for bad in (
        "../secrets",
        "docs/../../etc/passwd",
        "docs/./x",
        "docs\\x",
        "/abs",
        "docs//x",
        "docs/",
    ):
        refused = await call(
            loopback_client,
            cid,
            "repos_get_content",
            {"owner": "octo", "repo": "hello", "path": bad},
        )
        assert refused["ok"] is False, bad
        assert "Path parameter 'path' must be a non-empty path of segments" in refused["error"]
    single = await call(
        loopback_client, cid, "repos_get_content", {"owner": "o/x", "repo": "hello", "path": "a"}
    )
    assert "Path parameter 'owner' must be a non-empty segment without '/'" in single["error"]
    assert len(server.log) == before, "a refused value sends nothing"

    # `nullable` became a type list: null clears the assignee instead of failing validation
    cleared = await call(
        loopback_client,
        cid,
        "issues_update",
        {"owner": "octo", "repo": "hello", "issue_number": 7, "assignee": None},
    )
    assert cleared["ok"] is True, cleared
    assert (server.last["raw_path"], server.last["body"]) == (
        "/repos/octo/hello/issues/7",
        {"assignee": None},
    )
    stored = await loopback_client.get(f"/api/v1/connectors/{cid}/actions/issues_update")
    assignee = stored.json()["parameters"]["properties"]["assignee"]
    assert assignee["type"] == ["string", "null"]
    assert "nullable" not in assignee


# --- Stripe: deepObject query, security schemes, HTML descriptions ------------------------


async def test_stripe_filtered_list_sends_deep_objects_with_the_derived_bearer(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    body = await imported(
        loopback_client,
        document=text("stripe_api"),
        name=unique("stripe"),
        base_url=server.url,
        include_paths=["/v1/customers", "/v1/customers/{customer}"],
        credentials={"token": "sk_test_wire_4242"},
    )
    # the document offers basic or bearer; the credentials sent chose bearer
    assert (body["auth_type"], body["auth_config"], body["warnings"]) == (
        "bearer",
        {"token_prefix": "Bearer"},
        [],
    )
    actions = {a["name"]: a for a in body["actions"]}
    listed = actions["get_customers"]
    assert listed["description"].startswith("Returns a list of your customers.")
    assert "<" not in "".join(a["description"] for a in body["actions"])

    result = await call(
        loopback_client,
        body["id"],
        "get_customers",
        {
            "created": {"gt": 1700000000, "lte": 1800000000},
            "email": "ada+test@example.com",
            "limit": 3,
            "expand": ["data.default_source", "data.tax"],
        },
    )
    assert result["ok"] is True, result
    seen = server.last
    assert (seen["method"], seen["raw_path"]) == ("GET", "/v1/customers")
    assert seen["raw_query"] == (
        "created[gt]=1700000000&created[lte]=1800000000&email=ada%2Btest%40example.com"
        "&limit=3&expand[0]=data.default_source&expand[1]=data.tax"
    )
    assert seen["query"] == [
        ["created[gt]", "1700000000"],
        ["created[lte]", "1800000000"],
        ["email", "ada+test@example.com"],
        ["limit", "3"],
        ["expand[0]", "data.default_source"],
        ["expand[1]", "data.tax"],
    ]
    assert seen["headers"]["authorization"] == "Bearer sk_test_wire_4242"

    spelt = await loopback_client.post(
        f"/api/v1/connectors/{body['id']}/actions/get_customers/test",
        json={"arguments": {"created": 1700000000}},
    )
    assert spelt.json()["ok"] is True, "the test route takes `arguments` too"
    assert server.last["raw_query"] == "created=1700000000"


async def test_stripe_without_credentials_names_the_alternative(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    body = await imported(
        loopback_client,
        document=text("stripe_api"),
        name=unique("stripe"),
        base_url=server.url,
        include_paths=["/v1/customers"],
    )
    assert (body["auth_type"], body["warnings"]) == (
        "basic",
        [
            "/security: imported as basic (basicAuth); the document also offers bearer "
            "(bearerAuth): pass auth_type (or matching credentials) to choose"
        ],
    )
    explicit = await imported(
        loopback_client,
        document=text("stripe_api"),
        name=unique("stripe"),
        base_url=server.url,
        include_paths=["/v1/customers"],
        auth_type="api_key",
        auth_config={"header_name": "X-Key"},
        credentials={"api_key": "k-12345"},
    )
    assert (explicit["auth_type"], explicit["auth_config"], explicit["warnings"]) == (
        "api_key",
        {"header_name": "X-Key"},
        [],
    ), "an explicit auth_type wins and silences the document's schemes"


# --- Swagger 2.0: converted on import -----------------------------------------------------


async def test_swagger2_document_imports_and_sends_json_multipart_and_the_api_key(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    yaml_text = SWAGGER2.read_text()
    as_published = await imported(loopback_client, document=yaml_text, name=unique("vt-default"))
    assert as_published["base_url"] == "https://api.visiblethread.com/api/v1"
    assert (as_published["auth_type"], as_published["auth_config"]) == (
        "api_key",
        {"header_name": "apiKey"},
    )

    body = await imported(
        loopback_client,
        document=yaml_text,
        name=unique("vt"),
        base_url=server.url + "/api/v1",
        credentials={"api_key": "vt-key-13579"},
    )
    assert body["warnings"] == []
    actions = {a["name"]: a for a in body["actions"]}
    assert sorted(actions) == [
        "get_dictionaries",
        "get_doc_by_id",
        "get_documents",
        "get_scan_by_id",
        "get_scan_url_by_id",
        "get_search_results",
        "get_searches",
        "get_webscans",
        "run_scan",
        "run_search",
        "upload_dictionary",
        "upload_doc",
    ]
    scan = {"title": "Docs", "webUrls": [{"url": "https://example.test/a"}]}
    assert (await call(loopback_client, body["id"], "run_scan", scan))["ok"] is True
    seen = server.last
    assert (seen["method"], seen["raw_path"]) == ("POST", "/api/v1/webscans")
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["body"] == scan
    assert seen["headers"]["apikey"] == "vt-key-13579"

    await call(
        loopback_client,
        body["id"],
        "get_search_results",
        {"docId": 12, "dictionaryId": 34, "matchingOnly": True},
    )
    assert (server.last["raw_path"], server.last["raw_query"]) == (
        "/api/v1/searches/12/34",
        "matchingOnly=true",
    )

    uploaded = await call(
        loopback_client,
        body["id"],
        "upload_doc",
        {"file": "plain text document", "longSentenceWordCount": 20},
    )
    assert uploaded["ok"] is True, uploaded
    seen = server.last
    assert seen["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    assert (
        'form-data; name="file"; filename="file"\r\n'
        "Content-Type: application/octet-stream\r\n\r\nplain text document\r\n"
    ) in seen["body"]
    assert 'form-data; name="longSentenceWordCount"\r\n\r\n20\r\n' in seen["body"]
    missing = await call(loopback_client, body["id"], "upload_doc", {"longSentenceWordCount": 20})
    assert missing["ok"] is False
    assert "'file' is a required property" in missing["error"]
