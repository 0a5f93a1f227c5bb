from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fixtures.crud import (
    check_delete,
    check_pagination,
    check_patch_rejected,
    check_rejected,
    create,
)

PATH = "/api/v1/conventions"


def convention(**extra: Any) -> dict[str, Any]:
    return {"language": "python", "content": "Use type hints everywhere.", **extra}


async def test_create_returns_201(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, convention(directory="src/api"))
    assert (created["language"], created["directory"]) == ("python", "src/api")
    assert created["content"] == "Use type hints everywhere."
    assert (await client.get(f"{PATH}/{created['id']}")).json() == created


async def test_directory_defaults_to_language_level(client: httpx.AsyncClient) -> None:
    assert (await create(client, PATH, convention()))["directory"] is None


async def test_directories_are_normalized(client: httpx.AsyncClient) -> None:
    for directory, stored in [
        ("./src/api/", "src/api"),
        ("src\\api", "src/api"),
        ("/", ""),
        (".", ""),
    ]:
        created = await create(client, PATH, convention(directory=directory))
        assert created["directory"] == stored, directory


async def test_same_scope_twice_is_allowed(client: httpx.AsyncClient) -> None:
    """Conventions have no unique name: several may share a language and directory."""
    await create(client, PATH, convention())
    await create(client, PATH, convention())
    assert (await client.get(PATH)).json()["total"] == 2


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    await check_pagination(
        client, PATH, [convention(), convention(language="go"), convention(directory="lib")]
    )


async def test_patch_changes_only_sent_fields(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, convention(directory="src"))
    item = f"{PATH}/{created['id']}"
    resp = await client.patch(item, json={"content": "Prefer dataclasses."})
    assert resp.status_code == 200, resp.text
    patched = resp.json()
    assert patched["content"] == "Prefer dataclasses."
    assert (patched["language"], patched["directory"]) == ("python", "src")

    resp = await client.patch(item, json={"directory": "./src/web/"})
    assert resp.json()["directory"] == "src/web"
    resp = await client.patch(item, json={"directory": None})
    assert resp.status_code == 200, "null directory = back to language level"
    assert resp.json()["directory"] is None


async def test_patch_explicit_null(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, convention())
    item = f"{PATH}/{created['id']}"
    for field in ("language", "content"):
        await check_patch_rejected(client, item, {field: None}, mentions=[field])


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, convention())
    await check_delete(client, PATH, created["id"])


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"content": "c"}, "language"),
    ({"language": "python"}, "content"),
    (convention(language=""), "language"),
    (convention(language="has space"), "language"),
    (convention(language="l" * 65), "language"),
    (convention(content=""), "content"),
    (convention(content="c" * 20_001), "content"),
    (convention(directory=""), "directory"),
    (convention(directory="d" * 1025), "directory"),
    (convention(directory=["src"]), "directory"),
    (convention(scope="repo"), "scope"),
]
"""(body, field the 422 must name)"""


async def test_bad_input_is_422_and_writes_nothing(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for body, field in BAD_INPUT:
        with subtests.test(field=field, body=str(body)[:80]):
            await check_rejected(client, PATH, body, mentions=[field])
