"""Real SKILL.md files (anthropics/skills, Apache-2.0; see tests/data/README.md) import as
published: hyphenated names, extra front-matter keys kept, `name` override."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.fixtures.crud import check_rejected, total

PATH = "/api/v1/skills"
IMPORT = "/api/v1/skills/import"
SKILLS = Path(__file__).resolve().parents[1] / "data" / "skills"
REAL = ["mcp-builder", "brand-guidelines", "internal-comms", "template-skill"]


def document(name: str) -> str:
    return (SKILLS / name / "SKILL.md").read_text(encoding="utf-8")


async def test_real_skill_documents_import_under_their_hyphenated_names(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for name in REAL:
        with subtests.test(skill=name):
            resp = await client.post(IMPORT, json={"document": document(name)})
            assert resp.status_code == 201, resp.text
            body = resp.json()
            assert body["name"] == name
            assert body["description"]
            assert body["content"]
            assert "---" not in body["content"].splitlines()[0]
            stored = (await client.get(f"{PATH}/{body['id']}")).json()
            assert stored == body
    assert await total(client, PATH) == len(REAL)


async def test_license_and_other_front_matter_keys_are_kept_and_shown(
    client: httpx.AsyncClient,
) -> None:
    created = (await client.post(IMPORT, json={"document": document("mcp-builder")})).json()
    assert created["front_matter"] == {"license": "Complete terms in LICENSE.txt"}
    assert created["content"].startswith("# MCP Server Development Guide")
    # the optional keys of the Agent Skills format: allowed-tools and a metadata mapping
    doc = document("brand-guidelines").replace(
        "license: Complete terms in LICENSE.txt\n",
        "license: Apache-2.0\nallowed-tools: Bash(git:*) Read\n"
        "metadata:\n  author: example-org\n  version: '1.0'\n  released: 2025-10-16\n",
    )
    resp = await client.post(IMPORT, json={"document": doc, "name": "brand"})
    assert resp.status_code == 201, resp.text
    meta = resp.json()["front_matter"]
    assert meta == {
        "license": "Apache-2.0",
        "allowed-tools": "Bash(git:*) Read",
        "metadata": {"author": "example-org", "version": "1.0", "released": "2025-10-16"},
    }
    assert (await client.get(f"{PATH}/{resp.json()['id']}")).json()["front_matter"] == meta


async def test_name_override_imports_the_same_document_twice(client: httpx.AsyncClient) -> None:
    first = await client.post(IMPORT, json={"document": document("mcp-builder")})
    assert first.status_code == 201
    await check_rejected(
        client,
        IMPORT,
        {"document": document("mcp-builder")},
        status=409,
        kind="Conflict",
        mentions=["mcp-builder"],
        list_path=PATH,
    )
    second = await client.post(
        IMPORT, json={"document": document("mcp-builder"), "name": "mcp-builder-v2"}
    )
    assert second.status_code == 201, second.text
    assert second.json()["name"] == "mcp-builder-v2"
    assert second.json()["content"] == first.json()["content"]
    # with an override the front matter may leave its own name out
    nameless = "---\ndescription: d\n---\nSteps."
    third = await client.post(IMPORT, json={"document": nameless, "name": "no-name"})
    assert third.status_code == 201, third.text
    await check_rejected(
        client,
        IMPORT,
        {"document": document("mcp-builder"), "name": "Bad Name"},
        mentions=["name"],
        list_path=PATH,
    )


async def test_a_skill_without_content_is_refused(client: httpx.AsyncClient) -> None:
    for body in ({"name": "x"}, {"name": "x", "content": ""}, {"name": "x", "content": " \n"}):
        await check_rejected(client, PATH, body, mentions=["content"], list_path=PATH)
    await check_rejected(
        client,
        IMPORT,
        {"document": "---\nname: x\ndescription: d\n---\n\n"},
        mentions=["document", "empty"],
        list_path=PATH,
    )
    created = (await client.post(PATH, json={"name": "x", "content": "c"})).json()
    blank = await client.patch(f"{PATH}/{created['id']}", json={"content": ""})
    assert blank.status_code == 422
    assert blank.json()["error"] == "Invalid"
