"""`POST /knowledge-bases/{id}/documents` bodies: JSON `{name, text, format}` or a multipart
file upload (`file`, optional `name` and `format` parts)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from app.errors import Invalid, PayloadTooLarge
from app.knowledge.documents import FORMATS, decode, detect_format
from app.knowledge.schemas import DocumentCreate
from app.knowledge.service import MAX_DOCUMENT_BYTES

_FORM_FIELDS = frozenset({"file", "name", "format"})

REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {"schema": DocumentCreate.model_json_schema()},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "name": {"type": "string", "maxLength": 256},
                    "format": {"type": "string", "enum": list(FORMATS)},
                },
            }
        },
    },
}
"""OpenAPI for the two body forms (the route reads the request itself)."""


def _invalid(exc: ValidationError) -> Invalid:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    return Invalid(f"{where}: {err['msg']}")


async def read_document(request: Request) -> DocumentCreate:
    """The document in the request, whichever form it was sent in; 413/422 otherwise."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        return await _from_form(request)
    if content_type not in ("application/json", ""):
        raise Invalid(
            f"body: unsupported content type {content_type!r}; send application/json "
            "or multipart/form-data"
        )
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Invalid(f"body: not valid JSON ({exc})") from exc
    try:
        return DocumentCreate.model_validate(body)
    except ValidationError as exc:
        raise _invalid(exc) from exc


async def _from_form(request: Request) -> DocumentCreate:
    try:
        form = await request.form(max_files=1, max_fields=4, max_part_size=MAX_DOCUMENT_BYTES)
    except Exception as exc:  # the multipart parser's errors are plain exceptions
        raise Invalid(f"body: not a valid multipart form ({exc})") from exc
    try:
        return await _document(form)
    finally:
        await form.close()


async def _document(form: FormData) -> DocumentCreate:
    unknown = sorted(set(form.keys()) - _FORM_FIELDS)
    if unknown:
        raise Invalid(f"{unknown[0]}: unknown form field (send file, name, format)")
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise Invalid("file: required (a text, Markdown or HTML file)")
    raw = await upload.read(MAX_DOCUMENT_BYTES + 1)
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise PayloadTooLarge(
            f"file: larger than {MAX_DOCUMENT_BYTES} bytes; split it into several documents"
        )
    declared = form.get("format")
    name = form.get("name") or upload.filename or ""
    if declared is not None and not isinstance(declared, str):
        raise Invalid("format: must be text, markdown or html")
    if not isinstance(name, str):
        raise Invalid("name: must be a string")
    fmt = declared or detect_format(upload.filename, upload.content_type)
    try:
        return DocumentCreate(name=name, text=decode(raw), format=fmt)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise _invalid(exc) from exc
