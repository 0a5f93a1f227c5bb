from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from app.kit.schemas import (
    OrEmpty,
    ReadSchema,
    Schema,
    ShortText,
    Slug,
    from_column,
    one_spelling,
)
from app.security.secrets_view import MaskedValues

Transport = Literal["stdio", "sse", "streamable_http"]
Url = Annotated[str, StringConstraints(pattern=r"^https?://", max_length=2048)]
Command = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
Timeout = Annotated[float, Field(gt=0, le=600)]


class McpServerCreate(Schema):
    name: Slug
    description: ShortText = ""
    transport: Transport
    command: Command | None = None
    args: list[Annotated[str, StringConstraints(max_length=4096)]] = Field(default_factory=list)
    env: dict[str, str] | None = None
    """Secret: encrypted at rest, never returned."""
    url: Url | None = None
    headers: dict[str, str] | None = None
    """Secret: encrypted at rest, never returned."""
    connect_timeout_s: Timeout = 20.0
    call_timeout_s: Timeout = 60.0

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerCreate:
        check_transport(self.transport, command=self.command, url=self.url)
        return self


def check_transport(transport: str, *, command: str | None, url: str | None) -> None:
    if transport == "stdio" and not command:
        raise ValueError("command is required for transport 'stdio'")
    if transport != "stdio" and not url:
        raise ValueError(f"url is required for transport {transport!r}")


class McpServerUpdate(Schema):
    name: Slug | None = None
    description: ShortText | None = None
    transport: Transport | None = None
    command: Command | None = None
    args: list[Annotated[str, StringConstraints(max_length=4096)]] | None = None
    env: dict[str, str] | None = None
    url: Url | None = None
    headers: dict[str, str] | None = None
    connect_timeout_s: Timeout | None = None
    call_timeout_s: Timeout | None = None


class McpToolRead(Schema):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)


class McpServerRead(ReadSchema):
    name: str
    description: str
    transport: str
    command: str | None
    args: list[str]
    env: MaskedValues
    url: str | None
    headers: MaskedValues
    connect_timeout_s: float
    call_timeout_s: float
    tools: Annotated[list[McpToolRead], from_column("tools", "tools_cache"), OrEmpty]
    tools_refreshed_at: datetime | None


class McpCallRequest(Schema):
    tool: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments; `parameters` is accepted too (the `mcp` meta-tool's word)."""

    @model_validator(mode="before")
    @classmethod
    def _parameters(cls, data: Any) -> Any:
        return one_spelling(data, "arguments", "parameters")


class McpServerCreated(McpServerRead):
    tools_error: str | None = None
    """Why the new server's tools could not be listed at create (None: listed, see `tools`);
    `POST /mcp-servers/{id}/refresh` lists them once it is reachable."""


class McpImportResult(Schema):
    name: str
    """The server's key in the document."""
    status: Literal["created", "failed"]
    server: McpServerCreated | None = None
    error: dict[str, str] | None = None
    """`{error, detail}` of a server that was not created (e.g. a stdio command not on the
    allow-list, a duplicate name)."""
    warnings: list[str] = Field(default_factory=list)


class McpImportRead(Schema):
    created: int
    failed: int
    servers: list[McpImportResult]
