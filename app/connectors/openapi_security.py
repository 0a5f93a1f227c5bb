"""A connector's auth from an OpenAPI document's `components.securitySchemes` and `security`.

Candidates, in order: the schemes named by the top-level `security` requirements, then by
operations' requirements, then any other defined scheme. `http bearer` → bearer, `http basic`
→ basic, `apiKey` in a header or the query → api_key, `oauth2`/`openIdConnect` → bearer (an
access token obtained elsewhere, with a warning); a cookie API key or another scheme is
skipped with a warning. The credentials sent with the import choose among the candidates
(`{"token"}` picks bearer, `{"username", "password"}` basic, `{"api_key"}` api_key);
without them the first candidate is taken and the others are named in a warning. A
requirement that needs several schemes at once is imported with its first one, and says so.
An explicit `auth_type` on the import skips all of this (the service applies it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from app.connectors.openapi_doc import Refs, mapping, pointer
from app.errors import Invalid

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
CREDENTIAL_KEYS: dict[str, frozenset[str]] = {
    "bearer": frozenset({"token"}),
    "basic": frozenset({"username", "password"}),
    "api_key": frozenset({"api_key"}),
}


@dataclass(frozen=True)
class _Candidate:
    scheme: str
    auth_type: str
    config: dict[str, Any]
    note: str | None = None
    """A warning to give when this candidate is the one imported."""


def derive_auth(
    doc: Mapping[str, Any],
    refs: Refs,
    warnings: list[str],
    *,
    credential_keys: Collection[str] = (),
) -> tuple[str, dict[str, Any]]:
    """(auth_type, auth_config) the document's security implies; see the module docstring."""
    components = mapping(doc.get("components") or {}, "/components")
    schemes = mapping(components.get("securitySchemes") or {}, "/components/securitySchemes")
    if not schemes:
        return "none", {}
    order, together = _security_order(doc, schemes)
    candidates: list[_Candidate] = []
    for scheme_name in order:
        at = pointer("components", "securitySchemes", scheme_name)
        scheme = mapping(refs.shallow(schemes[scheme_name], at), at)
        found = _map_scheme(scheme, at, warnings)
        if found is not None:
            candidates.append(_Candidate(scheme_name, *found))
    if not candidates:
        return "none", {}
    given = frozenset(credential_keys)
    chosen = next((c for c in candidates if given and CREDENTIAL_KEYS[c.auth_type] == given), None)
    if chosen is None:
        chosen = candidates[0]
        others = [c for c in candidates[1:] if c.auth_type != chosen.auth_type]
        if others:
            offered = ", ".join(f"{c.auth_type} ({c.scheme})" for c in others)
            warnings.append(
                f"/security: imported as {chosen.auth_type} ({chosen.scheme}); the document "
                f"also offers {offered}: pass auth_type (or matching credentials) to choose"
            )
    if chosen.note:
        warnings.append(chosen.note)
    partners = together.get(chosen.scheme)
    if partners:
        warnings.append(
            f"/security: {chosen.scheme} is required together with {', '.join(partners)}; "
            f"only {chosen.scheme} is sent"
        )
    return chosen.auth_type, chosen.config


def _security_order(
    doc: Mapping[str, Any], schemes: Mapping[str, Any]
) -> tuple[list[str], dict[str, list[str]]]:
    """Scheme names in preference order, and the schemes each must be sent together with."""
    ordered: dict[str, None] = {}
    together: dict[str, list[str]] = {}
    requirements = list(doc.get("security") or [])
    for item in (doc.get("paths") or {}).values():
        for method in METHODS:
            op = item.get(method) if isinstance(item, dict) else None
            if isinstance(op, dict):
                requirements += list(op.get("security") or [])
    for requirement in requirements:
        if not isinstance(requirement, dict):
            continue
        names = [k for k in requirement if k in schemes]
        ordered.update(dict.fromkeys(names))
        if len(names) > 1:
            for name in names:
                together.setdefault(name, [n for n in names if n != name])
    ordered.update(dict.fromkeys(schemes))
    return list(ordered), together


def _map_scheme(
    scheme: Mapping[str, Any], at: str, warnings: list[str]
) -> tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str] | None:
    kind = scheme.get("type")
    if kind is None:
        raise Invalid(f"{at}: security scheme has no 'type'")
    if kind == "http":
        http_scheme = str(scheme.get("scheme", "")).lower()
        if http_scheme in ("bearer", "basic"):
            return http_scheme, ({"token_prefix": "Bearer"} if http_scheme == "bearer" else {})
    elif kind == "apiKey":
        where, key_name = scheme.get("in"), scheme.get("name")
        if not key_name:
            raise Invalid(f"{at}/name: apiKey scheme needs a 'name'")
        if where == "header":
            return "api_key", {"header_name": str(key_name)}
        if where == "query":
            return "api_key", {"query_param": str(key_name)}
        warnings.append(f"{at}: API key in {where!r} is not supported; skipped")
        return None
    elif kind in ("oauth2", "openIdConnect"):
        note = f"{at}: {kind} imported as bearer; store an access token as credentials"
        return "bearer", {"token_prefix": "Bearer"}, note
    label = f"{kind} {scheme.get('scheme')}" if kind == "http" else str(kind)
    warnings.append(f"{at}: unsupported security scheme ({label}) skipped")
    return None
