"""A skill folder on the embedded SQLite store: imported from its zip, its files read back,
replaced, and deleted with the skill (the files' ON DELETE CASCADE)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from app.config import Settings
from tests.skills.test_folders import MCP_BUILDER, folder_files, zip_folder
from tests.storage.test_sqlite_app import _query, embedded, keyring, running

__all__ = ["embedded", "keyring"]


async def test_a_skill_folder_on_sqlite(embedded: Settings) -> None:
    settings = embedded.model_copy(update={"admin_token": SecretStr("qv_sqlite_admin_0123456789")})
    published = folder_files(MCP_BUILDER)
    async with running(settings, "qv_sqlite_admin_0123456789") as client:
        archive = {"file": ("mcp-builder.zip", zip_folder(MCP_BUILDER), "application/zip")}
        created = await client.post("/api/v1/skills/import", files=archive)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        assert len(created.json()["files"]) == len(published) - 1
        got = await client.get(f"/api/v1/skills/{sid}/files/reference/evaluation.md")
        assert got.content == published["reference/evaluation.md"]
        again = await client.post("/api/v1/skills/import", files=archive, data={"replace": "true"})
        assert again.status_code == 200, again.text
        assert again.json()["id"] == sid
        assert (await client.delete(f"/api/v1/skills/{sid}")).status_code == 204
    assert _query(settings, "SELECT count(*) FROM skill_files") == [(0,)]


pytestmark = pytest.mark.usefixtures("keyring")
