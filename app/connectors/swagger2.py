"""Swagger 2.0 → OpenAPI 3.0, in memory, before the import reads the document.

The reference converter (`swagger2openapi`) is a Node tool and no maintained Python package
converts offline on its own, so this module converts what the import reads:
* `host` + `basePath` + `schemes` → `servers[0]` (https preferred; without `host` the
  server is relative and the import asks for `base_url`);
* `definitions` → `components.schemas` (every `#/definitions/` `$ref` rewritten); a `file`
  type → `string`/`binary`; `x-nullable` → `nullable`;
* `securityDefinitions` → `components.securitySchemes` (`basic` → `http basic`, `apiKey`
  as is, `oauth2` with its flow); `security` is kept;
* parameters: `$ref`s to `#/parameters/` inlined; a `body` parameter → `requestBody` in the
  operation's (or document's) `consumes` media type, JSON preferred; `formData` parameters →
  one `multipart/form-data` (a `file` field, or `consumes` says so) or
  `application/x-www-form-urlencoded` object body; the type keywords of other parameters →
  `schema`, and `collectionFormat` → `style`/`explode` (`csv` → `form`/`simple` not
  exploded, `ssv` → `spaceDelimited`, `pipes` → `pipeDelimited`, `multi` → `form` exploded;
  `tsv` is sent as `csv` with a warning).
Responses are not converted (the import does not read them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.connectors.openapi_doc import Refs, mapping, measure, parameter_list, pointer
from app.errors import Invalid

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
_SCHEMA_KEYS = (
    "type",
    "format",
    "items",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
)
_OPERATION_KEYS = ("operationId", "summary", "description", "tags", "deprecated", "security")
_FLOWS = {
    "implicit": "implicit",
    "password": "password",
    "application": "clientCredentials",
    "accessCode": "authorizationCode",
}
_JSON = "application/json"


def convert_swagger2(doc: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    """An OpenAPI 3.0 document equivalent (for the import) to the Swagger 2.0 `doc`."""
    version = str(doc.get("swagger"))
    if not version.startswith("2."):
        raise Invalid(f"/swagger: unsupported version {version!r} (Swagger 2.0 only)")
    measure(doc)  # bounded size and nesting before the recursive rewrite
    refs = Refs(dict(doc))
    consumes = _list(doc.get("consumes"))
    out: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": doc.get("info") or {},
        "servers": [{"url": _server_url(doc)}],
        "components": {
            "schemas": {
                str(k): _schema(v)
                for k, v in mapping(doc.get("definitions") or {}, "/definitions").items()
            },
            "securitySchemes": _security_schemes(doc.get("securityDefinitions") or {}),
        },
        "paths": {},
    }
    if "security" in doc:
        out["security"] = doc["security"]
    for path, raw_item in mapping(doc.get("paths") or {}, "/paths").items():
        at = pointer("paths", path)
        item = mapping(refs.shallow(raw_item, at), at)
        shared = _resolved(item.get("parameters"), f"{at}/parameters", refs)
        converted: dict[str, Any] = {}
        for method in METHODS:
            if method not in item:
                continue
            op_at = f"{at}/{method}"
            op = mapping(item[method], op_at)
            own = _resolved(op.get("parameters"), f"{op_at}/parameters", refs)
            params = {**shared, **own}
            media = _list(op.get("consumes")) or consumes
            converted[method] = _operation(op, params, media, op_at, warnings)
        out["paths"][path] = converted
    return out


def _list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _server_url(doc: Mapping[str, Any]) -> str:
    base_path = str(doc.get("basePath") or "")
    host = doc.get("host")
    if not host:
        return base_path or "/"
    schemes = _list(doc.get("schemes"))
    scheme = "https" if "https" in schemes or not schemes else schemes[0]
    return f"{scheme}://{host}{base_path}"


def _schema(node: Any) -> Any:
    """A Swagger schema as OpenAPI 3.0 (refs, `file`, `x-nullable`)."""
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#/definitions/"):
            out[key] = "#/components/schemas/" + value[len("#/definitions/") :]
        elif key == "x-nullable":
            out["nullable"] = bool(value)
        elif key == "discriminator" and isinstance(value, str):
            continue  # 2.0's discriminator is a property name; 3.0's is an object
        else:
            out[key] = _schema(value)
    if out.get("type") == "file":
        out["type"], out["format"] = "string", "binary"
    return out


def _security_schemes(definitions: Any) -> dict[str, Any]:
    schemes: dict[str, Any] = {}
    for name, raw in mapping(definitions, "/securityDefinitions").items():
        at = pointer("securityDefinitions", name)
        definition = mapping(raw, at)
        kind = definition.get("type")
        if kind == "basic":
            schemes[name] = {"type": "http", "scheme": "basic"}
        elif kind == "apiKey":
            schemes[name] = {k: definition[k] for k in ("type", "in", "name") if k in definition}
        elif kind == "oauth2":
            flow = _FLOWS.get(str(definition.get("flow")), "implicit")
            urls = {k: definition[k] for k in ("authorizationUrl", "tokenUrl") if k in definition}
            flows: dict[str, Any] = {flow: {**urls, "scopes": definition.get("scopes") or {}}}
            schemes[name] = {"type": "oauth2", "flows": flows}
        else:
            schemes[name] = dict(definition)
        if "description" in definition:
            schemes[name]["description"] = definition["description"]
    return schemes


def _resolved(raw: Any, at: str, refs: Refs) -> dict[tuple[str, str], dict[str, Any]]:
    """(name, in) → parameter with its pointer as `x-at`, `$ref`s followed, in document order."""
    found = parameter_list(raw, at, refs, ("path", "query", "header", "body", "formData"))
    return {key: {**param, "x-at": p_at} for key, (p_at, param) in found.items()}


def _operation(
    op: Mapping[str, Any],
    params: Mapping[tuple[str, str], dict[str, Any]],
    consumes: list[str],
    at: str,
    warnings: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {k: op[k] for k in _OPERATION_KEYS if k in op}
    out.update({k: v for k, v in op.items() if isinstance(k, str) and k.startswith("x-")})
    plain: list[dict[str, Any]] = []
    form: dict[str, dict[str, Any]] = {}
    body: dict[str, Any] | None = None
    for (_, where), param in params.items():
        if where == "body":
            body = param
        elif where == "formData":
            form[param["name"]] = param
        else:
            plain.append(_parameter(param, warnings))
    if plain:
        out["parameters"] = plain
    if body is not None:
        media = next((m for m in consumes if "json" in m.lower()), None) or (
            consumes[0] if consumes else _JSON
        )
        request: dict[str, Any] = {"content": {media: {"schema": _schema(body.get("schema"))}}}
        request["required"] = bool(body.get("required", False))
        if body.get("description"):
            request["description"] = body["description"]
        out["requestBody"] = request
        if form:
            warnings.append(f"{at}: both body and formData parameters; formData skipped")
    elif form:
        out["requestBody"] = _form_body(form, consumes)
    return out


def _value_schema(param: Mapping[str, Any]) -> dict[str, Any]:
    schema = {k: _schema(param[k]) for k in _SCHEMA_KEYS if k in param}
    if "x-nullable" in param:
        schema["nullable"] = bool(param["x-nullable"])
    if schema.get("type") == "file":
        schema["type"], schema["format"] = "string", "binary"
    return schema


def _parameter(param: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    at, where = str(param["x-at"]), str(param["in"])
    out: dict[str, Any] = {"name": param["name"], "in": where, "schema": _value_schema(param)}
    for key in ("description", "required", "allowEmptyValue"):
        if key in param:
            out[key] = param[key]
    out.update({k: v for k, v in param.items() if k.startswith("x-") and k != "x-at"})
    if param.get("type") == "array":
        fmt = str(param.get("collectionFormat") or "csv")
        if fmt == "tsv":
            warnings.append(f"{at}/collectionFormat: tsv is not supported; sent comma-separated")
            fmt = "csv"
        if fmt == "multi" and where != "query":
            warnings.append(f"{at}/collectionFormat: multi is for query parameters; sent as csv")
            fmt = "csv"
        if where == "query":
            styles = {"csv": "form", "multi": "form", "ssv": "spaceDelimited"}
            out["style"] = styles.get(fmt, "pipeDelimited")
            out["explode"] = fmt == "multi"
        elif fmt != "csv":
            warnings.append(f"{at}/collectionFormat: {fmt} in {where}; sent comma-separated")
    return out


def _form_body(form: Mapping[str, dict[str, Any]], consumes: list[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    has_file = False
    for name, param in form.items():
        schema = _value_schema(param)
        has_file = has_file or param.get("type") == "file"
        if param.get("description"):
            schema["description"] = param["description"]
        properties[name] = schema
        if param.get("required"):
            required.append(name)
    multipart = has_file or any(m.startswith("multipart/form-data") for m in consumes)
    media = "multipart/form-data" if multipart else "application/x-www-form-urlencoded"
    body: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        body["required"] = required
    return {"content": {media: {"schema": body}}, "required": bool(required)}
