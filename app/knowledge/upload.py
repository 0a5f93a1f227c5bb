"""`POST /knowledge-bases/{id}/documents` bodies: JSON `{name, text, format, replace}`, JSON
`{url, name?, format?, replace}` (a page fetched by URL), or a multipart file upload (`file`,
optional `name`, `format` and `replace` parts)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request

from app.convert.formats import FORMATS, TEXT_FORMATS, detect_format
from app.errors import Invalid, PayloadTooLarge
from app.knowledge.ingest import Upload
from app.knowledge.schemas import DocumentCreate, DocumentImport

_FORM_FIELDS = frozenset({"file", "name", "format", "replace"})
_TRUE = {"true": True, "false": False}

REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "oneOf": [DocumentCreate.model_json_schema(), DocumentImport.model_json_schema()]
            }
        },
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "name": {"type": "string", "maxLength": 256},
                    "format": {"type": "string", "enum": list(FORMATS)},
                    "replace": {"type": "string", "enum": ["true", "false"]},
                },
            }
        },
    },
}
"""OpenAPI for the body forms (the route reads the request itself)."""


def _invalid(exc: ValidationError) -> Invalid:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    return Invalid(f"{where}: {err['msg']}")


async def read_document(request: Request, *, max_bytes: int) -> Upload | DocumentImport:
    """The document in the request, whichever form it was sent in; 413/422 otherwise."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        return await _from_form(request, max_bytes)
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
        if isinstance(body, dict) and "url" in body:
            return DocumentImport.model_validate(body)
        data = DocumentCreate.model_validate(body)
    except ValidationError as exc:
        raise _invalid(exc) from exc
    if data.format not in TEXT_FORMATS:
        raise Invalid(
            f"format: {data.format} is a binary format; upload the file (multipart/form-data) "
            "or import it by url"
        )
    raw = data.text.encode("utf-8", "surrogatepass")
    return Upload(name=data.name, raw=raw, format=data.format, replace=data.replace)


async def _from_form(request: Request, max_bytes: int) -> Upload:
    try:
        form = await request.form(max_files=1, max_fields=5)
    except Exception as exc:  # the multipart parser's errors are plain exceptions
        raise Invalid(f"body: not a valid multipart form ({exc})") from exc
    try:
        return await _document(form, max_bytes)
    finally:
        await form.close()


def _text_field(form: FormData, field: str) -> str | None:
    value = form.get(field)
    if value is not None and not isinstance(value, str):
        raise Invalid(f"{field}: must be a string, not a file")
    return value


async def _document(form: FormData, max_bytes: int) -> Upload:
    unknown = sorted(set(form.keys()) - _FORM_FIELDS)
    if unknown:
        raise Invalid(f"{unknown[0]}: unknown form field (send file, name, format, replace)")
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise Invalid(f"file: required (a file in one of: {', '.join(FORMATS)})")
    replace = (_text_field(form, "replace") or "false").strip().lower()
    if replace not in _TRUE:
        raise Invalid("replace: must be true or false")
    return await from_upload(
        upload,
        name=_text_field(form, "name"),
        declared=_text_field(form, "format"),
        replace=_TRUE[replace],
        max_bytes=max_bytes,
    )


async def from_upload(
    upload: UploadFile,
    *,
    name: str | None,
    declared: str | None,
    replace: bool,
    max_bytes: int,
) -> Upload:
    """An uploaded file as a document (the API's multipart form and the console's upload)."""
    raw = await upload.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise PayloadTooLarge(
            f"file: larger than {max_bytes} bytes (QUIVER_MAX_IMPORT_BYTES); split it into "
            "several documents"
        )
    if declared is not None and declared not in FORMATS:
        raise Invalid(f"format: must be one of {', '.join(FORMATS)}")
    try:
        name = DocumentCreate(name=name or upload.filename or "", text="").name
    except ValidationError as exc:
        raise _invalid(exc) from exc
    fmt = declared or detect_format(upload.filename, upload.content_type)
    return Upload(name=name, raw=raw, format=fmt, replace=replace)
