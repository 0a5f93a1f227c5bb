"""Skill folders as published (anthropics/skills, Apache-2.0; see tests/data/README.md):
a `.zip` of the folder or JSON `{document, files}`, every file kept and readable, scripts
stored and listed, re-import with `replace`, and the refusals (traversal, links, bombs)."""

from __future__ import annotations

import io
import stat
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.crud import assert_error, total

PATH = "/api/v1/skills"
IMPORT = "/api/v1/skills/import"
SKILLS = Path(__file__).resolve().parents[1] / "data" / "skills"
MCP_BUILDER = SKILLS / "mcp-builder"
WEB_ARTIFACTS = SKILLS / "web-artifacts-builder"


def folder_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def zip_folder(folder: Path, *, top: bool = True) -> bytes:
    """The folder zipped as a user would (`zip -r mcp-builder.zip mcp-builder/`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if top:
            archive.writestr(f"{folder.name}/", b"")
        for path, data in folder_files(folder).items():
            archive.writestr(f"{folder.name}/{path}" if top else path, data)
    return buffer.getvalue()


def make_zip(entries: dict[str, bytes], *, links: tuple[str, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name in links:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, data)
    return buffer.getvalue()


async def upload(client: httpx.AsyncClient, archive: bytes, **fields: str) -> httpx.Response:
    return await client.post(
        IMPORT, files={"file": ("skill.zip", archive, "application/zip")}, data=fields
    )


DOC = "---\nname: triage\ndescription: Triage a bug\n---\nSee reference/steps.md.\n"


async def test_a_published_folder_zip_imports_every_file(client: httpx.AsyncClient) -> None:
    published = folder_files(MCP_BUILDER)
    resp = await upload(client, zip_folder(MCP_BUILDER))
    assert resp.status_code == 201, resp.text
    skill = resp.json()
    assert skill["name"] == "mcp-builder"
    assert skill["content"].startswith("# MCP Server Development Guide")
    listed = {f["path"]: f for f in skill["files"]}
    assert set(listed) == set(published) - {"SKILL.md"}
    assert listed["reference/mcp_best_practices.md"] == {
        "path": "reference/mcp_best_practices.md",
        "size": len(published["reference/mcp_best_practices.md"]),
        "media_type": "text/markdown",
        "script": False,
        "text": True,
    }
    assert listed["scripts/evaluation.py"]["script"] is True
    assert listed["scripts/requirements.txt"]["script"] is True  # under scripts/
    assert listed["LICENSE.txt"]["script"] is False
    for path, data in published.items():
        if path == "SKILL.md":
            continue
        got = await client.get(f"{PATH}/{skill['id']}/files/{path}")
        assert got.status_code == 200, path
        assert got.content == data, path


async def test_binary_files_and_a_root_level_zip(client: httpx.AsyncClient) -> None:
    published = folder_files(WEB_ARTIFACTS)
    resp = await upload(client, zip_folder(WEB_ARTIFACTS, top=False))
    assert resp.status_code == 201, resp.text
    skill = resp.json()
    listed = {f["path"]: f for f in skill["files"]}
    archive = listed["scripts/shadcn-components.tar.gz"]
    assert (archive["text"], archive["script"]) == (False, True)
    assert archive["size"] == len(published["scripts/shadcn-components.tar.gz"])
    assert listed["scripts/init-artifact.sh"]["script"] is True
    got = await client.get(f"{PATH}/{skill['id']}/files/scripts/shadcn-components.tar.gz")
    assert got.content == published["scripts/shadcn-components.tar.gz"]
    missing = await client.get(f"{PATH}/{skill['id']}/files/scripts/nope.sh")
    assert_error(missing, 404, "NotFound", mentions=["nope.sh", "init-artifact.sh"])


async def test_lists_stay_small(client: httpx.AsyncClient) -> None:
    created = (await upload(client, zip_folder(MCP_BUILDER))).json()
    page = (await client.get(PATH)).json()
    (item,) = page["items"]
    assert not {"content", "files", "script"} & set(item)
    assert item["file_count"] == len(created["files"]) == 9
    assert item["name"] == "mcp-builder"
    assert len(str(item)) < 600  # the full skill is ~130 KB with its files
    assert (await client.get(f"{PATH}/{created['id']}")).json()["content"] == created["content"]


async def test_json_folder_and_replace(client: httpx.AsyncClient) -> None:
    files = {"reference/steps.md": "1. Reproduce.\n", "scripts/label.py": "print('bug')\n"}
    first = await client.post(IMPORT, json={"document": DOC, "files": files})
    assert first.status_code == 201, first.text
    skill = first.json()
    assert [f["path"] for f in skill["files"]] == ["reference/steps.md", "scripts/label.py"]
    changed = DOC.replace("Triage a bug", "Triage a bug report").replace("See", "Read")
    again = await client.post(IMPORT, json={"document": changed})
    assert_error(again, 409, "Conflict", mentions=["triage", "replace"])
    replaced = await client.post(IMPORT, json={"document": changed, "replace": True})
    assert replaced.status_code == 200, replaced.text
    body = replaced.json()
    assert body["id"] == skill["id"]
    assert (body["description"], body["content"]) == (
        "Triage a bug report",
        "Read reference/steps.md.",
    )
    assert body["files"] == skill["files"]  # no files sent: the stored ones are kept
    swapped = await client.post(
        IMPORT, json={"document": changed, "replace": True, "files": {"notes.md": "n"}}
    )
    assert swapped.status_code == 200
    assert [f["path"] for f in swapped.json()["files"]] == ["notes.md"]
    gone = await client.get(f"{PATH}/{skill['id']}/files/reference/steps.md")
    assert gone.status_code == 404
    zipped = await upload(client, make_zip({"SKILL.md": DOC.encode()}), replace="true")
    assert zipped.status_code == 200, zipped.text
    assert zipped.json()["files"] == []
    assert zipped.json()["content"] == "See reference/steps.md."
    assert await total(client, PATH) == 1


TRAVERSALS = ["../evil.md", "/etc/passwd", "a/../../b", "ref\\x.md", "a//b", "./../x", "C:/x"]


async def test_paths_outside_the_folder_are_refused(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for path in TRAVERSALS:
        with subtests.test(path=path, form="json"):
            resp = await client.post(IMPORT, json={"document": DOC, "files": {path: "x"}})
            assert_error(resp, 422, "Invalid", mentions=["files", repr(path)[1:6]])
        with subtests.test(path=path, form="zip"):
            archive = make_zip({"SKILL.md": DOC.encode(), path: b"x"})
            assert_error(await upload(client, archive), 422, "Invalid", mentions=["file"])
    linked = make_zip({"SKILL.md": DOC.encode(), "ref": b"/etc/passwd"}, links=("ref",))
    assert_error(await upload(client, linked), 422, "Invalid", mentions=["symbolic link"])
    assert await total(client, PATH) == 0


async def test_zip_bombs_and_oversized_folders_are_refused(client: httpx.AsyncClient) -> None:
    bomb = make_zip({"SKILL.md": DOC.encode(), "reference/zeros.md": b"0" * 60_000_000})
    assert len(bomb) < 200_000
    started = time.monotonic()
    resp = await upload(client, bomb)
    assert_error(resp, 413, "PayloadTooLarge", mentions=["reference/zeros.md", "2000000"])
    assert time.monotonic() - started < 5
    # many small members that add up: refused at the folder limit, the rest never inflated
    wide = make_zip({"SKILL.md": DOC.encode(), **{f"r/{i}.md": b"1" * 1_900_000 for i in range(8)}})
    assert_error(await upload(client, wide), 413, "PayloadTooLarge", mentions=["8000000"])
    many = make_zip({"SKILL.md": DOC.encode(), **{f"r/{i}.md": b"x" for i in range(201)}})
    assert_error(await upload(client, many), 413, "PayloadTooLarge", mentions=["201", "200"])
    files = {f"r/{i}.md": "x" for i in range(201)}
    resp = await client.post(IMPORT, json={"document": DOC, "files": files})
    assert_error(resp, 422, "Invalid", mentions=["files"])
    assert await total(client, PATH) == 0


BAD_UPLOADS: list[tuple[str, bytes, dict[str, Any], int, list[str]]] = [
    ("not a zip", b"PK\x03\x04 nope", {}, 422, ["not a zip archive"]),
    ("no SKILL.md", make_zip({"ref/a.md": b"a"}), {}, 422, ["no SKILL.md"]),
    ("binary SKILL.md", make_zip({"SKILL.md": b"\xff\xfe\x00"}), {}, 422, ["SKILL.md", "UTF-8"]),
    ("bad name", make_zip({"SKILL.md": DOC.encode()}), {"name": "Bad Name"}, 422, ["name"]),
    ("bad replace", make_zip({"SKILL.md": DOC.encode()}), {"replace": "maybe"}, 422, ["replace"]),
    ("extra field", make_zip({"SKILL.md": DOC.encode()}), {"x": "1"}, 422, ["x"]),
]


async def test_bad_uploads_are_422(client: httpx.AsyncClient, subtests: pytest.Subtests) -> None:
    for case, archive, fields, status, mentions in BAD_UPLOADS:
        with subtests.test(case=case):
            assert_error(await upload(client, archive, **fields), status, mentions=mentions)
    no_file = await client.post(IMPORT, data={"name": "x"}, files={"other": ("a", b"a")})
    assert_error(no_file, 422, "Invalid")
    assert await total(client, PATH) == 0


async def test_deleting_a_skill_deletes_its_files(client: httpx.AsyncClient) -> None:
    skill = (await upload(client, zip_folder(MCP_BUILDER))).json()
    assert (await client.delete(f"{PATH}/{skill['id']}")).status_code == 204
    gone = await client.get(f"{PATH}/{skill['id']}/files/reference/evaluation.md")
    assert_error(gone, 404, "NotFound")
    again = await upload(client, zip_folder(MCP_BUILDER))
    assert again.status_code == 201, again.text
