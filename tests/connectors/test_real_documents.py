"""Real API descriptions (GitHub, Twilio, Stripe; see tests/data/README.md) imported through
HTTP and executed against a recording server on 127.0.0.1: JSON, form and multipart bodies,
auth overrides, import filters and re-sync."""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import uuid
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx

from tests.connectors.big_spec import big_document
from tests.connectors.server_app import LocalServer

DATA = Path(__file__).resolve().parents[1] / "data" / "openapi"
IMPORT = "/api/v1/connectors/import"
METHODS = {"get", "put", "post", "delete", "patch", "head", "options"}
SID = "AC" + "0123456789abcdef" * 2


@cache
def text(name: str) -> str:
    return gzip.decompress((DATA / f"{name}.json.gz").read_bytes()).decode()


def document(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text(name))
    return loaded


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def run(client: httpx.AsyncClient, cid: str, action: str, args: dict[str, Any]) -> None:
    resp = await client.post(
        f"/api/v1/connectors/{cid}/actions/{action}/test", json={"parameters": args}
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["ok"] is True, resp.json()


# --- GitHub: 1,223 operations, no security schemes ------------------------------------


async def test_github_imports_whole_and_takes_a_token_through_the_auth_override(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    name = unique("github")
    base = {"document": text("github_api"), "name": name, "base_url": server.url}
    refused = await loopback_client.post(IMPORT, json={**base, "credentials": {"token": "ghp-1"}})
    assert refused.status_code == 422, refused.text
    assert "auth_type 'none'" in refused.json()["detail"]

    resp = await loopback_client.post(
        IMPORT,
        json={
            **base,
            "auth_type": "bearer",
            "auth_config": {"token_prefix": "token"},
            "credentials": {"token": "ghp-real-doc-1234"},
        },
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert len(body["actions"]) == len(operations(document("github_api"))) == 1223
    assert (body["auth_type"], body["auth_config"], body["has_credentials"]) == (
        "bearer",
        {"token_prefix": "token"},
        True,
    )
    assert body["warnings"] == [
        "/paths/~1markdown~1raw/post/requestBody: media types text/plain, text/x-markdown "
        "not supported; skipped",
        "/paths/~1repos~1{owner}~1{repo}~1releases~1{release_id}~1assets/post/requestBody: "
        "media types application/octet-stream not supported; skipped",
    ]
    longest = max(body["actions"], key=lambda a: len(a["description"]))
    assert len(longest["description"]) > 2000, "long descriptions are stored whole"
    stored = await loopback_client.get(f"/api/v1/connectors/{body['id']}/actions/{longest['name']}")
    assert stored.json()["description"] == longest["description"]

    await run(
        loopback_client,
        body["id"],
        "issues_create",
        {
            "owner": "octo",
            "repo": "hello",
            "title": "Found a bug",
            "body": "It breaks",
            "labels": ["bug"],
            "assignees": ["ada"],
        },
    )
    seen = server.last
    assert (seen["method"], seen["path"]) == ("POST", "/repos/octo/hello/issues")
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["body"] == {
        "title": "Found a bug",
        "body": "It breaks",
        "labels": ["bug"],
        "assignees": ["ada"],
    }
    assert seen["headers"]["authorization"] == "token ghp-real-doc-1234"


async def test_github_import_filters(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    doc = document("github_api")
    tagged = {op["operationId"] for _, _, op in operations(doc) if "issues" in op["tags"]}
    resp = await loopback_client.post(
        IMPORT,
        json={
            "document": doc,
            "name": unique("gh-issues"),
            "base_url": server.url,
            "include_tags": ["issues"],
        },
    )
    assert resp.status_code == 201, resp.text
    names = sorted(a["name"] for a in resp.json()["actions"])
    assert names == sorted(i.replace("/", "_").replace("-", "_") for i in tagged)
    assert len(names) == 58

    resp = await loopback_client.post(
        IMPORT,
        json={
            "document": doc,
            "name": unique("gh-pulls"),
            "base_url": server.url,
            "include_paths": ["/repos/{owner}/{repo}/pulls*"],
            "include_operations": ["pulls/list*"],
        },
    )
    assert resp.status_code == 201, resp.text
    assert sorted(a["name"] for a in resp.json()["actions"]) == [
        "pulls_list",
        "pulls_list_comments_for_review",
        "pulls_list_commits",
        "pulls_list_files",
        "pulls_list_requested_reviewers",
        "pulls_list_review_comments",
        "pulls_list_review_comments_for_repo",
        "pulls_list_reviews",
    ]

    before = (await loopback_client.get("/api/v1/connectors")).json()["total"]
    none = await loopback_client.post(
        IMPORT,
        json={
            "document": doc,
            "name": unique("gh-none"),
            "base_url": server.url,
            "include_tags": ["no-such-tag"],
        },
    )
    assert none.status_code == 422
    assert "no operation matches the filters" in none.json()["detail"]
    assert (await loopback_client.get("/api/v1/connectors")).json()["total"] == before


# --- Twilio: form-urlencoded bodies -----------------------------------------------------


async def test_twilio_form_bodies_are_parameters_and_sent_urlencoded(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    resp = await loopback_client.post(
        IMPORT,
        json={
            "document": text("twilio_api_v2010"),
            "name": unique("twilio"),
            "base_url": server.url,
            "credentials": {"username": SID, "password": "twilio-secret-99"},
        },
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert (len(body["actions"]), body["warnings"], body["auth_type"]) == (195, [], "basic")
    create = next(a for a in body["actions"] if a["name"] == "create_message")
    props = create["parameters"]["properties"]
    assert {"To", "From", "Body", "MediaUrl"} <= set(props)
    assert create["parameters"]["required"][:2] == ["AccountSid", "To"]

    await run(
        loopback_client,
        body["id"],
        "create_message",
        {
            "AccountSid": SID,
            "To": "+15558675310",
            "From": "+15017122661",
            "Body": "Hi & welcome = 100%",
            "MediaUrl": ["https://a.test/1.png", "https://a.test/2"],
            "SendAsMms": True,
        },
    )
    seen = server.last
    assert (seen["method"], seen["path"]) == ("POST", f"/2010-04-01/Accounts/{SID}/Messages.json")
    assert seen["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert parse_qsl(seen["body"]) == [
        ("To", "+15558675310"),
        ("From", "+15017122661"),
        ("Body", "Hi & welcome = 100%"),
        ("MediaUrl", "https://a.test/1.png"),
        ("MediaUrl", "https://a.test/2"),
        ("SendAsMms", "true"),
    ]
    assert seen["headers"]["authorization"].startswith("Basic ")


# --- Stripe: deepObject form fields and a multipart upload --------------------------------


async def test_stripe_form_and_multipart_bodies(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    resp = await loopback_client.post(
        IMPORT,
        json={
            "document": text("stripe_api"),
            "name": unique("stripe"),
            "base_url": server.url,
            "auth_type": "bearer",
            "credentials": {"token": "sk_test_realdoc_1234"},
        },
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert (len(body["actions"]), body["warnings"]) == (452, [])

    await run(
        loopback_client,
        body["id"],
        "post_customers",
        {
            "email": "ada@example.com",
            "metadata": {"order": "7"},
            "expand": ["tax"],
            "preferred_locales": ["en", "fr"],
        },
    )
    seen = server.last
    assert (seen["method"], seen["path"]) == ("POST", "/v1/customers")
    assert parse_qsl(seen["body"]) == [
        ("email", "ada@example.com"),
        ("metadata[order]", "7"),
        ("expand[0]", "tax"),
        ("preferred_locales[0]", "en"),
        ("preferred_locales[1]", "fr"),
    ]
    assert seen["headers"]["authorization"] == "Bearer sk_test_realdoc_1234"

    await run(
        loopback_client,
        body["id"],
        "post_files",
        {
            "file": "%PDF-1.4 tiny",
            "purpose": "dispute_evidence",
            "expand": ["links"],
        },
    )
    seen = server.last
    assert seen["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    # Stripe's copy declares `file` a plain string (no `format: binary`): a text part
    assert 'form-data; name="file"\r\n\r\n%PDF-1.4 tiny\r\n' in seen["body"]
    assert 'form-data; name="purpose"\r\n\r\ndispute_evidence\r\n' in seen["body"]
    assert 'form-data; name="expand[0]"\r\n\r\nlinks\r\n' in seen["body"]


# --- re-sync ---------------------------------------------------------------------------


async def test_reimport_updates_actions_in_place_and_keeps_credentials(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    old = document("twilio_api_v2010")
    resp = await loopback_client.post(
        IMPORT,
        json={
            "document": old,
            "name": unique("twilio"),
            "base_url": server.url,
            "include_paths": ["*/Messages*", "*/Calls.json"],
            "credentials": {"username": SID, "password": "twilio-secret-99"},
        },
    )
    assert resp.status_code == 201, resp.text
    created = resp.json()
    ids = {a["name"]: a["id"] for a in created["actions"]}
    assert {"create_message", "list_message", "create_call"} <= set(ids)

    new = copy.deepcopy(old)
    messages = "/2010-04-01/Accounts/{AccountSid}/Messages.json"
    new["paths"][messages]["post"]["description"] = "Send a message (v2)"
    resp = await loopback_client.post(
        f"/api/v1/connectors/{created['id']}/import",
        json={
            "document": new,
            "include_paths": ["*/Messages*", "/2010-04-01/Accounts/{AccountSid}/Recordings.json"],
        },
    )
    assert resp.status_code == 200, resp.text
    synced = resp.json()
    changes = synced["changes"]
    assert changes["changed"] == ["create_message"]
    assert changes["removed"] == ["create_call", "list_call"]
    assert changes["added"] == ["list_recording"]
    assert changes["unchanged"] == len(ids) - 3
    after = {a["name"]: a for a in synced["actions"]}
    assert after["create_message"]["id"] == ids["create_message"], "updated in place"
    assert after["create_message"]["description"].endswith("Send a message (v2)")
    assert (synced["has_credentials"], synced["base_url"], synced["name"]) == (
        True,
        server.url,
        created["name"],
    )
    stored = (await loopback_client.get(f"/api/v1/connectors/{created['id']}")).json()
    assert {a["name"] for a in stored["actions"]} == set(after)

    await run(loopback_client, created["id"], "create_message", {"AccountSid": SID, "To": "+1"})
    assert server.last["headers"]["authorization"].startswith("Basic ")

    unknown = await loopback_client.post(
        f"/api/v1/connectors/{uuid.uuid4()}/import", json={"document": new}
    )
    assert unknown.status_code == 404


# --- size: 10,000 operations -------------------------------------------------------------


async def test_ten_thousand_operations_import_while_the_server_keeps_answering(
    loopback_client: httpx.AsyncClient,
) -> None:
    doc = big_document(10_000)
    task = asyncio.create_task(
        loopback_client.post(
            IMPORT,
            json={
                "document": doc,
                "name": unique("big"),
                "credentials": {"token": "big-token-1234"},
            },
        )
    )
    answered = 0
    while not task.done():
        assert (await loopback_client.get("/healthz")).status_code == 200
        answered += not task.done()
        await asyncio.sleep(0.01)
    resp = task.result()
    assert resp.status_code == 201, resp.text[:500]
    body = resp.json()
    assert (len(body["actions"]), body["warnings"], body["auth_type"]) == (10_000, [], "bearer")
    assert answered >= 5, "the conversion ran on the event loop"
    patch = next(a for a in body["actions"] if a["name"] == "patch_thing9")
    assert patch["parameters"]["required"] == ["project", "id", "name"]
