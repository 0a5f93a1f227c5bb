from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.kit.schemas import ReadSchema, Schema

Scope = Literal["admin", "chat"]
KeyName = Annotated[str, StringConstraints(min_length=1, max_length=128)]


def _default_scopes() -> list[Scope]:
    return ["chat"]


class ApiKeyCreate(Schema):
    name: KeyName
    scopes: list[Scope] = Field(default_factory=_default_scopes, min_length=1)


class ApiKeyUpdate(Schema):
    name: KeyName | None = None
    scopes: list[Scope] | None = Field(default=None, min_length=1)


class ApiKeyRead(ReadSchema):
    name: str
    prefix: str
    scopes: list[str]
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyRead):
    key: str
    """Shown once, at creation; only its hash is stored."""
