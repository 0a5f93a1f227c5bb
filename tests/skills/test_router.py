from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fixtures.crud import (
    assert_error,
    check_delete,
    check_duplicates,
    check_pagination,
    check_patch_rejected,
    check_rejected,
    check_slugs,
    check_unknown_ids,
    create,
    total,
)

PATH = "/api/v1/skills"
IMPORT = "/api/v1/skills/import"

GOOD_DOC = """---
name: triage_bug
description: Triage an incoming bug report
---

# Steps
1. Reproduce.
2. Label.
"""


def skill(name: str = "triage", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "Triage bugs", "content": "1. read\n2. act", **extra}


async def test_create_returns_201_with_every_field(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, skill(script="print(1)", script_type="python"))
    assert created["name"] == "triage"
    assert created["content"] == "1. read\n2. act"
    assert (created["script"], created["script_type"]) == ("print(1)", "python")
    assert {"id", "created_at", "updated_at"} <= set(created)
    fetched = (await client.get(f"{PATH}/{created['id']}")).json()
    assert fetched == created


async def test_create_applies_defaults(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, {"name": "bare", "content": "c"})
    assert (created["description"], created["script"], created["front_matter"]) == ("", None, {})


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    await check_pagination(client, PATH, [skill("s1"), skill("s2"), skill("s3")])


async def test_patch_changes_only_sent_fields(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, skill())
    resp = await client.patch(f"{PATH}/{created['id']}", json={"description": "new"})
    assert resp.status_code == 200, resp.text
    patched = resp.json()
    assert patched["description"] == "new"
    assert {k: v for k, v in patched.items() if k not in ("description", "updated_at")} == {
        k: v for k, v in created.items() if k not in ("description", "updated_at")
    }
    assert patched["updated_at"] >= created["updated_at"]


async def test_patch_explicit_null(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, skill(script="x", script_type="bash"))
    item = f"{PATH}/{created['id']}"
    for field in ("name", "description", "content"):
        await check_patch_rejected(client, item, {field: None}, mentions=[field])
    cleared = await client.patch(item, json={"script": None, "script_type": None})
    assert cleared.status_code == 200
    assert (cleared.json()["script"], cleared.json()["script_type"]) == (None, None)


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, skill())
    await check_delete(client, PATH, created["id"])


async def test_unknown_ids_are_404(client: httpx.AsyncClient) -> None:
    await check_unknown_ids(client, PATH, {"description": "x"})


async def test_names_are_slugs(client: httpx.AsyncClient) -> None:
    await check_slugs(client, PATH, skill)


async def test_duplicate_names_are_409(client: httpx.AsyncClient) -> None:
    await check_duplicates(client, PATH, skill)


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({}, "name"),
    ({"name": 42}, "name"),
    ({"name": "ok", "description": ["x"]}, "description"),
    ({"name": "ok", "description": "d" * 2001}, "description"),
    ({"name": "ok", "content": "c" * 200_001}, "content"),
    ({"name": "ok", "script_type": "Not Valid"}, "script_type"),
    ({"name": "ok", "surprise": 1}, "surprise"),
]
"""(body, field the 422 must name)"""


async def test_bad_input_is_422_and_writes_nothing(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for body, field in BAD_INPUT:
        with subtests.test(field=field, body=str(body)[:80]):
            await check_rejected(client, PATH, body, mentions=[field])


async def test_non_object_body_is_422(client: httpx.AsyncClient) -> None:
    await check_rejected(client, PATH, ["triage"])
    resp = await client.post(
        PATH, content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_error(resp, 422, "Invalid", mentions=["body: JSON decode error: Expecting"])


async def test_import_skill_md(client: httpx.AsyncClient) -> None:
    resp = await client.post(IMPORT, json={"document": GOOD_DOC})
    assert resp.status_code == 201, resp.text
    body = resp.json()
    assert body["name"] == "triage_bug"
    assert body["description"] == "Triage an incoming bug report"
    assert body["content"] == "# Steps\n1. Reproduce.\n2. Label."
    assert (await client.get(f"{PATH}/{body['id']}")).json() == body


async def test_import_duplicate_name_is_409(client: httpx.AsyncClient) -> None:
    await create(client, PATH, skill("triage_bug"))
    await check_rejected(
        client,
        IMPORT,
        {"document": GOOD_DOC},
        status=409,
        kind="Conflict",
        mentions=["triage_bug"],
        list_path=PATH,
    )


BAD_DOCUMENTS: list[tuple[str, str, list[str]]] = [
    ("no-front-matter", "# No front matter\nJust a body.", ["front matter"]),
    ("bad-yaml", "---\nname: [unclosed\ndescription: d\n---\nbody", ["YAML"]),
    ("no-name", "---\ndescription: only a description\n---\nbody", ["name"]),
    ("no-description", "---\nname: x\n---\nbody", ["description"]),
    ("list", "---\n- a\n- b\n---\nbody", ["mapping"]),
    ("bad-slug", "---\nname: Bad-Name\ndescription: d\n---\nbody", ["name"]),
    ("int-name", "---\nname: 12\ndescription: d\n---\nbody", ["name"]),
    ("unclosed", "---\nname: x\ndescription: d\nbody without a closing line", ["front matter"]),
]


async def test_import_rejects_bad_documents(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for case, document, mentions in BAD_DOCUMENTS:
        with subtests.test(case=case):
            await check_rejected(
                client,
                IMPORT,
                {"document": document},
                mentions=["document", *mentions],
                list_path=PATH,
            )


async def test_import_needs_a_document(client: httpx.AsyncClient) -> None:
    for body in ({}, {"document": ""}, {"document": 5}):
        await check_rejected(client, IMPORT, body, mentions=["document"], list_path=PATH)
    assert await total(client, PATH) == 0
