from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from app.kit.schemas import ReadSchema, Schema

Scope = Literal["admin", "chat"]
KeyName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
RatePerMinute = Annotated[int, Field(ge=1, le=100_000)]
AgentIds = Annotated[list[uuid.UUID], Field(max_length=1000)]


def _default_scopes() -> list[Scope]:
    return ["chat"]


class ApiKeyCreate(Schema):
    name: KeyName
    scopes: list[Scope] = Field(default_factory=_default_scopes, min_length=1)
    agent_ids: AgentIds | None = None
    """Agents the key may chat with; null = every agent."""
    rate_limit_per_minute: RatePerMinute | None = None
    """Runs the key may start per minute; null = no limit."""


class ApiKeyUpdate(Schema):
    name: KeyName | None = None
    scopes: list[Scope] | None = Field(default=None, min_length=1)
    agent_ids: AgentIds | None = None
    rate_limit_per_minute: RatePerMinute | None = None


class ApiKeyRead(ReadSchema):
    name: str
    prefix: str
    scopes: list[str]
    last_used_at: datetime | None
    revoked_at: datetime | None
    agent_ids: list[uuid.UUID] | None
    rate_limit_per_minute: int | None


class ApiKeyCreated(ApiKeyRead):
    key: str
    """Shown once, at creation; only its hash is stored."""
