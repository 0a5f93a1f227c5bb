"""`POST /skills/import` bodies: JSON `{document, files?, name?, replace?}` or a multipart
upload of the folder's `.zip` (`file`, optional `name` and `replace` parts)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from app.errors import Invalid, PayloadTooLarge
from app.kit.schemas import Slug
from app.skills.folder import Folder, from_json, from_zip
from app.skills.schemas import SkillImport

MAX_ARCHIVE_BYTES = 8_000_000
_FORM_FIELDS = frozenset({"file", "name", "replace"})
_SLUG: TypeAdapter[str] = TypeAdapter(Slug)

REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {"schema": SkillImport.model_json_schema()},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {
                        "type": "string",
                        "format": "binary",
                        "description": "a .zip of the skill's folder (SKILL.md inside)",
                    },
                    "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
                    "replace": {"type": "boolean"},
                },
            }
        },
    },
}
"""OpenAPI for the two body forms (the route reads the request itself)."""


@dataclass(frozen=True, kw_only=True)
class ImportRequest:
    folder: Folder
    name: str | None
    replace: bool


def _invalid(exc: ValidationError) -> Invalid:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    return Invalid(f"{where}: {err['msg']}")


async def read_import(request: Request) -> ImportRequest:
    """The import in the request, whichever form it was sent in; 413/422 otherwise."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        return await _from_form(request)
    if content_type not in ("application/json", ""):
        raise Invalid(
            f"body: unsupported content type {content_type!r}; send application/json "
            "or multipart/form-data (a .zip in 'file')"
        )
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Invalid(f"body: JSON decode error: {exc}") from exc
    try:
        data = SkillImport.model_validate(body)
    except ValidationError as exc:
        raise _invalid(exc) from exc
    return ImportRequest(
        folder=from_json(data.document, data.files), name=data.name, replace=data.replace
    )


async def _from_form(request: Request) -> ImportRequest:
    try:
        form = await request.form(max_files=1, max_fields=4, max_part_size=MAX_ARCHIVE_BYTES)
    except Exception as exc:  # the multipart parser's errors are plain exceptions
        raise Invalid(f"body: not a valid multipart form ({exc})") from exc
    try:
        return await _folder(form)
    finally:
        await form.close()


async def _folder(form: FormData) -> ImportRequest:
    unknown = sorted(set(form.keys()) - _FORM_FIELDS)
    if unknown:
        raise Invalid(f"{unknown[0]}: unknown form field (send file, name, replace)")
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise Invalid("file: required (a .zip of the skill's folder)")
    raw = await upload.read(MAX_ARCHIVE_BYTES + 1)
    if len(raw) > MAX_ARCHIVE_BYTES:
        raise PayloadTooLarge(f"file: larger than {MAX_ARCHIVE_BYTES} bytes")
    name = form.get("name") or None
    if name is not None:
        try:
            name = _SLUG.validate_python(name)
        except ValidationError as exc:
            raise Invalid(f"name: {exc.errors()[0]['msg']}") from exc
    replace = form.get("replace") or "false"
    if not isinstance(replace, str) or replace.lower() not in ("true", "false", "1", "0"):
        raise Invalid("replace: must be true or false")
    return ImportRequest(folder=from_zip(raw), name=name, replace=replace.lower() in ("true", "1"))
