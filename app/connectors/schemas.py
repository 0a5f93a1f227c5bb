from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StringConstraints, field_validator, model_validator

from app.kit.schemas import Flag, ReadSchema, Schema, Slug, from_column, one_spelling

AuthType = Literal["none", "bearer", "api_key", "basic"]
Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
Location = Literal["path", "query", "header", "body"]
BaseUrl = Annotated[str, StringConstraints(pattern=r"^https?://[^\s]+$", max_length=2048)]
ActionPath = Annotated[str, StringConstraints(pattern=r"^/[^\s]*$", max_length=2048)]
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
Description = Annotated[str, StringConstraints(max_length=100_000)]
"""Connector and action descriptions: real API documents often run past 2,000 characters;
they are stored whole and cut when a prompt is built."""
MAX_ACTIONS = 20_000
DocumentText = Annotated[str, StringConstraints(min_length=1, max_length=50_000_000)]
Glob = Annotated[str, StringConstraints(min_length=1, max_length=512)]
_REQUIRED_CREDENTIALS: dict[str, set[str]] = {
    "none": set(),
    "bearer": {"token"},
    "api_key": {"api_key"},
    "basic": {"username", "password"},
}


class AuthConfig(Schema):
    header_name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,128}$")] | None = None
    token_prefix: Annotated[str, StringConstraints(max_length=64)] | None = None
    query_param: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,128}$")] | None = None


def check_parameters_schema(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """An action's parameters: a JSON Schema object whose properties may carry `x-location`.

    The metaschema check runs per property and is cached by content: imported documents
    repeat the same parameters (`owner`, `repo`, `page`) across hundreds of operations."""
    if not schema:
        schema = {"type": "object", "properties": {}}
    if schema.get("type", "object") != "object":
        raise ValueError("parameters must be a JSON Schema with type 'object'")
    props = schema.get("properties", {})
    shell = {k: v for k, v in schema.items() if k != "properties"}
    if not isinstance(props, dict):
        shell["properties"] = props
    for part in (shell, *(props.values() if isinstance(props, dict) else ())):
        problem = _schema_problem(json.dumps(part, sort_keys=True, default=str))
        if problem is not None:
            raise ValueError(f"parameters is not a valid JSON Schema: {problem}")
    encoding = schema.get("x-body-encoding")
    if encoding is not None and encoding not in ("json", "form", "multipart"):
        raise ValueError("parameters.x-body-encoding must be json|form|multipart")
    for name, prop in props.items():
        loc = prop.get("x-location") if isinstance(prop, dict) else None
        if loc is not None and loc not in ("path", "query", "header", "body"):
            raise ValueError(
                f"parameters.properties.{name}.x-location must be path|query|header|body"
            )
    for placeholder in _PLACEHOLDER.findall(path):
        if placeholder not in props:
            raise ValueError(f"path placeholder {{{placeholder}}} has no parameter of that name")
    return schema


@lru_cache(maxsize=1)
def _metaschema() -> Any:
    # Draft 7's metaschema: the keywords imported documents use, checked ~7x faster than
    # 2020-12's ($dynamicRef); a 2020-12-only keyword passes here and is still applied (or
    # refused as a typed error) when arguments are validated.
    from jsonschema import Draft7Validator

    return Draft7Validator(Draft7Validator.META_SCHEMA)


@lru_cache(maxsize=8192)
def _schema_problem(schema_json: str) -> str | None:
    from jsonschema.exceptions import best_match

    error = best_match(_metaschema().iter_errors(json.loads(schema_json)))
    return None if error is None else str(error.message)


class ActionCreate(Schema):
    name: Slug
    description: Description = ""
    method: Method = "GET"
    path: ActionPath = "/"
    parameters: dict[str, Any] = Field(default_factory=dict)
    body_template: Any | None = None
    requires_confirmation: Flag = False

    @model_validator(mode="after")
    def _schema(self) -> ActionCreate:
        self.parameters = check_parameters_schema(self.parameters, self.path)
        return self


class ActionUpdate(Schema):
    name: Slug | None = None
    description: Description | None = None
    method: Method | None = None
    path: ActionPath | None = None
    parameters: dict[str, Any] | None = None
    body_template: Any | None = None
    requires_confirmation: Flag | None = None


class ActionRead(ReadSchema):
    name: str
    description: str
    method: str
    path: str
    parameters: dict[str, Any]
    body_template: Any | None
    requires_confirmation: bool


def check_credentials(auth_type: str, credentials: dict[str, Any] | None) -> None:
    if credentials is None:
        return
    needed = _REQUIRED_CREDENTIALS[auth_type]
    missing = needed - set(credentials)
    extra = set(credentials) - needed
    if missing:
        raise ValueError(f"credentials for auth_type {auth_type!r} need {sorted(missing)}")
    if extra:
        raise ValueError(f"credentials for auth_type {auth_type!r} do not take {sorted(extra)}")


class ConnectorCreate(Schema):
    name: Slug
    description: Description = ""
    base_url: BaseUrl
    auth_type: AuthType = "none"
    auth_config: AuthConfig = Field(default_factory=AuthConfig)
    credentials: dict[str, Annotated[str, StringConstraints(max_length=8192)]] | None = None
    """Secret, write-only: bearer {token}, api_key {api_key}, basic {username, password}."""
    timeout_s: Annotated[float, Field(gt=0, le=300)] = 30.0
    actions: list[ActionCreate] = Field(default_factory=list, max_length=MAX_ACTIONS)

    @model_validator(mode="after")
    def _check(self) -> ConnectorCreate:
        check_credentials(self.auth_type, self.credentials)
        counts = Counter(a.name for a in self.actions)
        dupes = sorted(n for n, c in counts.items() if c > 1)
        if dupes:
            raise ValueError(f"duplicate action names: {dupes}")
        return self


class ConnectorUpdate(Schema):
    name: Slug | None = None
    description: Description | None = None
    base_url: BaseUrl | None = None
    auth_type: AuthType | None = None
    auth_config: AuthConfig | None = None
    credentials: dict[str, Annotated[str, StringConstraints(max_length=8192)]] | None = None
    timeout_s: Annotated[float, Field(gt=0, le=300)] | None = None


class ConnectorSummary(ReadSchema):
    """A connector in lists: its actions are counted, not embedded (`/{id}/actions` pages them)."""

    name: str
    description: str
    base_url: str
    auth_type: str
    auth_config: dict[str, Any]
    has_credentials: Annotated[
        bool, from_column("has_credentials", "credentials"), BeforeValidator(bool)
    ]
    """Whether credentials are stored; they are write-only and never read back."""
    timeout_s: float
    action_count: int = 0

    @classmethod
    def of(cls, connector: Any, action_count: int) -> ConnectorSummary:
        return cls.model_validate(connector).model_copy(update={"action_count": action_count})


class ConnectorRead(ConnectorSummary):
    """One connector with its actions embedded."""

    actions: list[ActionRead]

    @model_validator(mode="after")
    def _count(self) -> ConnectorRead:
        self.action_count = len(self.actions)
        return self


class ImportChanges(Schema):
    """What a re-import (`POST /connectors/{id}/import`) did to the connector's actions."""

    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int


class ConnectorImported(ConnectorRead):
    warnings: list[str]
    """What the import skipped or guessed (cookie parameters, non-JSON bodies, OAuth2 → bearer)."""
    changes: ImportChanges | None = None
    """Set by a re-import: actions added, changed and removed by name."""


class ConnectorImport(Schema):
    document: dict[str, Any] | DocumentText
    name: Slug | None = None
    base_url: BaseUrl | None = None
    credentials: dict[str, Annotated[str, StringConstraints(max_length=8192)]] | None = None
    """Optional, write-only: credentials for the auth type (the document's, or `auth_type`)."""
    auth_type: AuthType | None = None
    """Overrides the auth the document's security schemes imply (many declare none)."""
    auth_config: AuthConfig | None = None
    """Overrides the document's auth settings (header name, query parameter, token prefix)."""
    include_tags: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] = Field(
        default_factory=list, max_length=500
    )
    """Import only operations carrying one of these tags."""
    include_paths: list[Glob] = Field(default_factory=list, max_length=500)
    """Import only operations whose path matches one of these globs (`/repos/*/issues*`)."""
    include_operations: list[Glob] = Field(default_factory=list, max_length=500)
    """Import only operations whose operationId or action name matches one of these globs."""

    @field_validator("document")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, dict) and not value:
            raise ValueError("document is empty")
        return value


class ActionTestRequest(Schema):
    parameters: dict[str, Any] = Field(default_factory=dict)
    """The action's arguments; `arguments` is accepted too, as on the MCP call route."""

    @model_validator(mode="before")
    @classmethod
    def _arguments(cls, data: Any) -> Any:
        return one_spelling(data, "parameters", "arguments")
