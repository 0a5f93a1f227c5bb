"""OpenAPI 3.0/3.1 (and Swagger 2.0, converted first by `swagger2`) → a connector draft
(docs/contract.md §2 `POST /api/v1/connectors/import`; docs/connectors-openapi.md).

Choices a user of the import should know:
* base_url: the `base_url` argument wins as given; otherwise `servers[0].url` with server
  variables set to their defaults (a relative server URL then needs `base_url`).
* auth: derived from `securitySchemes` + `security` (`openapi_security`), unless the import
  names `auth_type`; the credentials sent choose among alternatives.
* parameters: schemas become plain JSON Schema (`openapi_schema.json_schema`: nullable as a
  type list, no OpenAPI-only keywords); `style`/`explode`/`allowReserved`/`x-multi-segment`
  are recorded for the executor (`params`); what cannot be honoured is a warning.
* descriptions: HTML becomes plain text (`app.convert.plain`).
* actions: `operationId` (snake_cased) or `method_path`, sanitised to `[a-z0-9_]{1,64}` and
  made unique. Parameters keep their schema plus `x-location`; cookie parameters and the
  headers OpenAPI reserves (Accept, Content-Type, Authorization) are skipped. A JSON object
  body becomes one body parameter per property (readOnly ones skipped; the schema's `required`
  kept unless the body says `required: false`); any other JSON body
  becomes a single `body` parameter sent as the whole body (`body_template: "{{body}}"`).
  Without a JSON body, an `application/x-www-form-urlencoded` or `multipart/form-data` object
  body becomes one body parameter per property too, and the parameters schema records the
  encoding in `x-body-encoding` (`form` or `multipart`) for the executor.
* filters: `include_tags`, `include_paths` and `include_operations` (globs, `*` and `?`)
  keep only the matching operations; given together, an operation must match each one.
* descriptions are kept whole (whitespace trimmed); what reaches the prompt is cut later.
* `$ref`s must be local (`#/...`); they are inlined, and a cycle is cut with a
  `{"description": "(recursive: <ref>)"}` schema. Expansion has a node budget per operation
  and a nesting limit (see `openapi_doc`). Errors raise `Invalid` naming the JSON pointer of
  the problem.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from app.connectors.actions import path_placeholders
from app.connectors.openapi_doc import (
    Refs,
    check_version,
    load,
    mapping,
    parameter_list,
    pointer,
    short_text,
)
from app.connectors.openapi_schema import json_schema, parameter_hints
from app.connectors.openapi_security import METHODS, derive_auth
from app.connectors.swagger2 import convert_swagger2
from app.convert.plain import plain_text
from app.errors import Invalid

_RESERVED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_PLACES = ("path", "query", "header", "cookie")
"""Where an OpenAPI 3 parameter goes (Swagger 2.0's `body` and `formData` are converted first)."""
FORM_ENCODINGS = {"application/x-www-form-urlencoded": "form", "multipart/form-data": "multipart"}
BODY_ENCODING = "x-body-encoding"
"""Top-level key of an action's parameters schema: how body parameters are encoded."""
TAGS = "x-tags"
"""Top-level key of an action's parameters schema: the operation's OpenAPI tags (the tool
rankers index them; the model never sees `x-` keys)."""


@dataclass(frozen=True, kw_only=True)
class ImportFilters:
    """Which operations to import; empty means all. Globs use `*` and `?` (fnmatch)."""

    include_tags: Sequence[str] = ()
    include_paths: Sequence[str] = ()
    include_operations: Sequence[str] = ()
    """Matched against the `operationId` and the action name."""

    def keeps(self, path: str, op: Mapping[str, Any], name: str) -> bool:
        if self.include_tags:
            tags = op.get("tags") if isinstance(op.get("tags"), list) else []
            if not any(str(tag) in self.include_tags for tag in tags or []):
                return False
        if self.include_paths and not _any_glob(path, self.include_paths):
            return False
        if self.include_operations:
            op_id = str(op.get("operationId") or "")
            if not (
                _any_glob(op_id, self.include_operations)
                or _any_glob(name, self.include_operations)
            ):
                return False
        return True

    def describe(self) -> str:
        given = {
            k: list(v)
            for k, v in (
                ("include_tags", self.include_tags),
                ("include_paths", self.include_paths),
                ("include_operations", self.include_operations),
            )
            if v
        }
        return ", ".join(f"{k}={v}" for k, v in given.items())


def _any_glob(value: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


class ActionDraft(BaseModel):
    name: str
    description: str = ""
    method: str
    path: str
    parameters: dict[str, Any]
    body_template: Any | None = None
    requires_confirmation: bool = False


class ConnectorDraft(BaseModel):
    name: str
    description: str = ""
    base_url: str
    auth_type: str = "none"
    auth_config: dict[str, Any] = Field(default_factory=dict)
    actions: list[ActionDraft] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    """What the import skipped or guessed, for the admin to review."""


def slug(text: str, *, fallback: str = "op", camel: bool = True) -> str:
    """snake_case `text` into `[a-z0-9_]{1,64}` (`findPetsByIDs` → `find_pets_by_ids`)."""
    snake = text
    if camel:
        snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", snake)
        snake = re.sub(r"([A-Z]+)([A-Z][a-z]{2,})", r"\1_\2", snake)
    cleaned = re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")
    return cleaned[:64].rstrip("_") or fallback


def parse_openapi(
    document: dict[str, Any] | str,
    *,
    name: str | None = None,
    base_url: str | None = None,
    filters: ImportFilters | None = None,
    auth_type: str | None = None,
    credential_keys: Collection[str] = (),
) -> ConnectorDraft:
    """Build a connector draft from an OpenAPI 3.x or Swagger 2.0 document (object, JSON or
    YAML text). With `auth_type` the document's security is not consulted (the caller
    applies it); otherwise `credential_keys` (the names of the credentials sent) choose
    among the schemes it offers.

    CPU-bound on large documents: call it from a worker thread in async code.
    """
    doc = load(document)
    warnings: list[str] = []
    if "swagger" in doc:
        doc = convert_swagger2(doc, warnings)
    check_version(doc)
    refs = Refs(doc)
    info = mapping(doc.get("info") or {}, "/info")
    if name is not None and not _NAME.match(name):
        raise Invalid(f"name: {name!r} must match [a-z0-9][a-z0-9_-]{{0,63}}")
    draft_name = name or slug(str(info.get("title") or "api"), fallback="api", camel=False)
    filters = filters or ImportFilters()
    actions = list(_actions(doc, refs, warnings, filters))
    if not actions:
        if filters.describe():
            raise Invalid(f"/paths: no operation matches the filters ({filters.describe()})")
        raise Invalid("/paths: the document defines no operations")
    auth: tuple[str, dict[str, Any]] = (auth_type, {}) if auth_type else ("none", {})
    if auth_type is None:
        auth = derive_auth(doc, refs, warnings, credential_keys=credential_keys)
    return ConnectorDraft(
        name=draft_name,
        description=_text(info.get("description") or info.get("title")),
        base_url=(base_url or _server_url(doc)).rstrip("/"),
        auth_type=auth[0],
        auth_config=auth[1],
        actions=actions,
        warnings=warnings,
    )


# --- servers ---------------------------------------------------------------------------


def _server_url(doc: Mapping[str, Any]) -> str:
    servers = doc.get("servers") or []
    if not isinstance(servers, list) or not servers:
        raise Invalid("/servers: no server URL in the document; pass base_url")
    server = mapping(servers[0], "/servers/0")
    url = str(server.get("url") or "")
    variables = server.get("variables") or {}
    for var, spec in mapping(variables, "/servers/0/variables").items():
        default = spec.get("default") if isinstance(spec, dict) else None
        if default is None:
            raise Invalid(f"{pointer('servers', 0, 'variables', var)}: variable has no default")
        url = url.replace("{" + var + "}", str(default))
    if not url.startswith(("http://", "https://")):
        raise Invalid(f"/servers/0/url: {url!r} is not an absolute http(s) URL; pass base_url")
    return url


# --- operations -------------------------------------------------------------------------


def _actions(
    doc: Mapping[str, Any], refs: Refs, warnings: list[str], filters: ImportFilters
) -> Iterator[ActionDraft]:
    paths = mapping(doc.get("paths") or {}, "/paths")
    used: set[str] = set()
    for path, raw_item in paths.items():
        at = pointer("paths", path)
        if not str(path).startswith("/"):
            raise Invalid(f"{at}: path must start with '/'")
        item = mapping(refs.shallow(raw_item, at), at)
        shared = parameter_list(item.get("parameters"), f"{at}/parameters", refs, _PLACES)
        for method in METHODS:
            if method not in item:
                continue
            op_at = f"{at}/{method}"
            op = mapping(item[method], op_at)
            if "responses" in op:
                mapping(op["responses"], f"{op_at}/responses")
            base = slug(str(op.get("operationId") or f"{method}_{path}"))
            if not filters.keeps(str(path), op, base):
                continue
            refs.reset()
            name = _unique(base, used)
            yield _action(name, method, str(path), op, shared, op_at, refs, warnings)


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 2
    while candidate in used:
        suffix = f"_{n}"
        candidate = name[: 64 - len(suffix)] + suffix
        n += 1
    used.add(candidate)
    return candidate


def _action(
    name: str,
    method: str,
    path: str,
    op: Mapping[str, Any],
    shared: dict[tuple[str, str], tuple[str, Any]],
    at: str,
    refs: Refs,
    warnings: list[str],
) -> ActionDraft:
    params = {**shared, **parameter_list(op.get("parameters"), f"{at}/parameters", refs, _PLACES)}
    properties: dict[str, Any] = {}
    required: list[str] = []
    placeholders = path_placeholders(path)
    for (p_name, where), (p_at, param) in params.items():
        skip = _skip_reason(p_name, where, placeholders, path, properties)
        if skip:
            warnings.append(f"{p_at}: {skip}")
            continue
        properties[p_name] = _param_schema(param, where, p_at, refs, warnings)
        if where == "path" or param.get("required"):
            required.append(p_name)
    for placeholder in placeholders:
        if placeholder not in properties:
            properties[placeholder] = {"type": "string", "x-location": "path"}
            required.append(placeholder)
    template, encoding = _request_body(op, at, refs, properties, required, warnings)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if encoding is not None:
        schema[BODY_ENCODING] = encoding
    tags = [str(t) for t in op.get("tags") or [] if isinstance(t, str | int)]
    if tags and isinstance(op.get("tags"), list):
        schema[TAGS] = tags
    return ActionDraft(
        name=name,
        description=_describe(op),
        method=method.upper(),
        path=path,
        parameters=schema,
        body_template=template,
        requires_confirmation=bool(op.get("x-requires-confirmation", False)),
    )


def _skip_reason(
    name: str, where: str, placeholders: list[str], path: str, taken: Mapping[str, Any]
) -> str | None:
    if where == "cookie":
        return f"cookie parameter {name!r} skipped (not supported)"
    if where == "header" and name.lower() in _RESERVED_HEADERS:
        return f"header {name!r} skipped (set by the connector)"
    if where == "path" and name not in placeholders:
        return f"path parameter {name!r} is not in {path!r}; skipped"
    if name in taken:
        return f"parameter {name!r} ({where}) clashes with another of that name; skipped"
    return None


def _param_schema(
    param: Mapping[str, Any], where: str, at: str, refs: Refs, warnings: list[str]
) -> dict[str, Any]:
    raw = param.get("schema")
    if raw is None and isinstance(param.get("content"), dict) and param["content"]:
        raw = next(iter(param["content"].values())).get("schema")
    schema = refs.schema(raw, f"{at}/schema") if raw is not None else {"type": "string"}
    schema = json_schema(schema) if isinstance(schema, dict) else {}
    if param.get("description") and "description" not in schema:
        schema["description"] = short_text(plain_text(str(param["description"])), limit=300)
    schema["x-location"] = where
    schema.update(parameter_hints(param, where, at, warnings))
    return schema


def _text(value: Any) -> str:
    return plain_text(value).strip() if isinstance(value, str) else ""


def _describe(op: Mapping[str, Any]) -> str:
    parts = [_text(op.get("summary")), _text(op.get("description"))]
    unique = [p for i, p in enumerate(parts) if p and p not in parts[:i]]
    text = " — ".join(unique)
    if op.get("deprecated"):
        text = f"(deprecated) {text}".strip()
    return text


def _request_body(
    op: Mapping[str, Any],
    at: str,
    refs: Refs,
    properties: dict[str, Any],
    required: list[str],
    warnings: list[str],
) -> tuple[Any, str | None]:
    """(body template, encoding): encoding is None for JSON, else `form` or `multipart`."""
    if "requestBody" not in op:
        return None, None
    b_at = f"{at}/requestBody"
    body = mapping(refs.shallow(op["requestBody"], b_at), b_at)
    content = mapping(body.get("content") or {}, f"{b_at}/content")
    media = next((m for m in content if _is_json(m)), None)
    encoding = None
    if media is None:
        media = next((m for m in content if _base(m) in FORM_ENCODINGS), None)
        encoding = FORM_ENCODINGS[_base(media)] if media is not None else None
    if media is None:
        if content:
            warnings.append(f"{b_at}: media types {', '.join(content)} not supported; skipped")
        return None, None
    m_at = f"{b_at}/content/{pointer(media)[1:]}"
    media_obj = mapping(content[media] or {}, m_at)
    schema = json_schema(refs.schema(media_obj.get("schema") or {}, f"{m_at}/schema"))
    # many documents (Twilio's) leave `requestBody.required` out; only an explicitly optional
    # body loses the `required` list of its fields
    body_required = bool(body.get("required", True))
    fields = _object_fields(schema)
    if fields is None:
        if encoding is not None:
            if not _is_empty_object(schema):
                warnings.append(f"{m_at}/schema: a {media} body must be an object; skipped")
            return None, None
        name = "body" if "body" not in properties else "request_body"
        properties[name] = {**(schema if isinstance(schema, dict) else {}), "x-location": "body"}
        if body_required:
            required.append(name)
        return "{{" + name + "}}", None
    props, needed = fields
    styles = _deep_objects(media_obj.get("encoding")) if encoding is not None else set()
    template: dict[str, str] = {}
    for key, prop in props.items():
        param = key if key not in properties else f"body_{key}"
        properties[param] = {**(prop if isinstance(prop, dict) else {}), "x-location": "body"}
        if key in styles:
            properties[param]["x-style"] = "deepObject"
        template[key] = "{{" + param + "}}"
        if body_required and key in needed:
            required.append(param)
    renamed = any(v != "{{" + k + "}}" for k, v in template.items())
    return (template if renamed else None), encoding


def _deep_objects(encoding: Any) -> set[str]:
    """Form fields the media type's `encoding` marks `style: deepObject` (`expand[0]=a`)."""
    if not isinstance(encoding, dict):
        return set()
    return {
        str(k)
        for k, v in encoding.items()
        if isinstance(v, dict) and v.get("style") == "deepObject"
    }


def _is_empty_object(schema: Any) -> bool:
    """`{"type": "object", "properties": {}}` and the like: a body with no fields."""
    return (
        isinstance(schema, dict)
        and not schema.get("properties")
        and (schema.get("type") in (None, "object") and not schema.get("allOf"))
    )


def _base(media: str) -> str:
    return media.split(";", 1)[0].strip().lower()


def _is_json(media: str) -> bool:
    base = _base(media)
    return base in ("application/json", "*/*") or base.endswith("+json")


def _object_fields(schema: Any) -> tuple[dict[str, Any], set[str]] | None:
    """Properties and required names of an object schema (allOf merged), else None."""
    if not isinstance(schema, dict):
        return None
    props: dict[str, Any] = {}
    needed: set[str] = set()
    for part in schema.get("allOf") or []:
        sub = _object_fields(part)
        if sub is None:
            return None
        props.update(sub[0])
        needed |= sub[1]
    if isinstance(schema.get("properties"), dict):
        props.update(schema["properties"])
        needed |= set(schema.get("required") or [])
    return (props, needed) if props else None
