from __future__ import annotations

from fastapi import APIRouter

from app.agents.schemas import AgentCreate, AgentRead, AgentUpdate
from app.agents.service import agent_service
from app.kit.crud_router import add_crud_routes

router = APIRouter(prefix="/agents", tags=["agents"])
add_crud_routes(
    router, service=agent_service, create=AgentCreate, update=AgentUpdate, read=AgentRead
)
