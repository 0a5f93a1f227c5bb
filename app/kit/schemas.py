"""Base schemas: strict input, ORM-readable output, pages."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
)

T = TypeVar("T")

SLUG_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
"""Resource names (`mcp-builder`, `sales_db`): lowercase, digits, `_` and `-`, 1-64 chars,
starting with a letter or digit. They appear inside tool names, which allow the same set."""
ShortText = Annotated[str, StringConstraints(max_length=2000)]
LongText = Annotated[str, StringConstraints(max_length=200_000)]
Flag = Annotated[bool, Strict()]
"""A boolean of a request body: `true` or `false` only (never `0`, `1` or `"yes"`)."""


def from_column(field: str, column: str) -> Any:
    """A read field whose row attribute has another name (`tables` ← `schema_cache`)."""
    return Field(validation_alias=AliasChoices(field, column))


OrEmpty = BeforeValidator(lambda value: value or [])
"""A list read from a nullable column: null reads as empty."""


class Schema(BaseModel):
    model_config = ConfigDict(from_attributes=True, extra="forbid")


def one_spelling(data: Any, name: str, other: str) -> Any:
    """A request body whose field `name` may also be spelt `other` (the `mcp` meta-tool says
    `parameters`, the admin call route `arguments`): `other` moves to `name`; both given
    with different values is refused. For a `model_validator(mode="before")`."""
    if not isinstance(data, dict) or other not in data:
        return data
    moved = dict(data)
    value = moved.pop(other)
    if name in moved and moved[name] != value:
        raise ValueError(f"give {name!r} or {other!r}, not both")
    moved[name] = value
    return moved


class ReadSchema(Schema):
    model_config = ConfigDict(from_attributes=True, extra="ignore")
    id: uuid.UUID
    created_at: datetime
    updated_at: datetime


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class ToolCallResult(Schema):
    """What the admin test routes answer: the same text the model would see."""

    ok: bool
    output: str
    error: str | None
    elapsed_ms: float
