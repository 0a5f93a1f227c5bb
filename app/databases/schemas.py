from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, StringConstraints

from app.kit.schemas import Flag, OrEmpty, ReadSchema, Schema, ShortText, Slug, from_column
from app.security.secrets_view import MaskedUrl

DbUrl = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
MaxRows = Annotated[int, Field(ge=1, le=10_000)]
QueryTimeout = Annotated[float, Field(gt=0, le=300)]


class DatabaseCreate(Schema):
    name: Slug
    description: ShortText = ""
    url: DbUrl
    """Secret: encrypted at rest; responses show it with the password masked."""
    read_only: Flag = True
    max_rows: MaxRows = 1000
    query_timeout_s: QueryTimeout = 30.0


class DatabaseUpdate(Schema):
    name: Slug | None = None
    description: ShortText | None = None
    url: DbUrl | None = None
    read_only: Flag | None = None
    max_rows: MaxRows | None = None
    query_timeout_s: QueryTimeout | None = None


class ColumnRead(Schema):
    model_config = Schema.model_config | {"extra": "ignore"}
    name: str
    type: str = ""
    nullable: bool = True
    primary_key: bool = False
    description: str | None = None


class TableRead(Schema):
    model_config = Schema.model_config | {"extra": "ignore"}
    name: str
    description: str | None = None
    hidden: bool = False
    columns: list[ColumnRead] = Field(default_factory=list)


class DatabaseRead(ReadSchema):
    name: str
    description: str
    url: MaskedUrl
    dialect: str
    read_only: bool
    max_rows: int
    query_timeout_s: float
    tables: Annotated[list[TableRead], from_column("tables", "schema_cache"), OrEmpty]
    introspected_at: datetime | None


class TableUpdate(Schema):
    hidden: Flag | None = None
    description: Annotated[str, StringConstraints(max_length=2000)] | None = None


class QueryRequest(Schema):
    sql: Annotated[str, StringConstraints(min_length=1, max_length=100_000)]
