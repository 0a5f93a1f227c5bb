from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError, field_validator

from app.agents.config import AgentConfig
from app.kit.schemas import LongText, ReadSchema, Schema, ShortText, Slug

Category = Literal["builtin", "knowledge", "skill", "connector", "database", "mcp", "agent"]
ModelName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
IdList = Annotated[list[uuid.UUID], Field(max_length=500)]


def _check_config(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validate on write; store only what the client sent (defaults stay defaults)."""
    if value is None:
        return None
    try:
        AgentConfig.model_validate(value)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            msg = msg.removeprefix("Value error, ")
            problems.append(f"{where}: {msg}")
        raise ValueError("; ".join(problems)) from None
    return value


class AgentCreate(Schema):
    name: Slug
    description: ShortText = ""
    instructions: LongText = ""
    model: ModelName | None = None
    model_config_json: dict[str, Any] = Field(default_factory=dict)
    tool_categories: list[Category] | None = None
    connector_ids: IdList = Field(default_factory=list)
    database_ids: IdList = Field(default_factory=list)
    mcp_server_ids: IdList = Field(default_factory=list)
    skill_ids: IdList = Field(default_factory=list)
    knowledge_base_ids: IdList = Field(default_factory=list)
    delegate_ids: IdList = Field(default_factory=list)

    _config = field_validator("model_config_json")(_check_config)


class AgentUpdate(Schema):
    name: Slug | None = None
    description: ShortText | None = None
    instructions: LongText | None = None
    model: ModelName | None = None
    model_config_json: dict[str, Any] | None = None
    tool_categories: list[Category] | None = None
    connector_ids: IdList | None = None
    database_ids: IdList | None = None
    mcp_server_ids: IdList | None = None
    skill_ids: IdList | None = None
    knowledge_base_ids: IdList | None = None
    delegate_ids: IdList | None = None

    _config = field_validator("model_config_json")(_check_config)


class AgentRead(ReadSchema):
    name: str
    description: str
    instructions: str
    model: str | None
    model_config_json: dict[str, Any]
    tool_categories: list[str] | None
    connector_ids: list[uuid.UUID]
    database_ids: list[uuid.UUID]
    mcp_server_ids: list[uuid.UUID]
    skill_ids: list[uuid.UUID]
    knowledge_base_ids: list[uuid.UUID]
    delegate_ids: list[uuid.UUID]
