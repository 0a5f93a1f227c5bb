"""`/v1/models` and `/v1/chat/completions`: thin routes over `service.py`.

Every error on these routes has OpenAI's shape (`app/errors.py`, `OPENAI_PREFIX`).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse

from app.chat.deps import RunManagerDep
from app.db.session import SessionDep
from app.kit.state import SettingsDep
from app.openai_api import service
from app.openai_api.schemas import ChatCompletionRequest, ModelCard, ModelList
from app.tenancy.principal import PrincipalDep

# Error statuses are declared with OpenAI's error schema by `app/kit/openapi.py`.
router = APIRouter(prefix="/v1", tags=["openai"])


@router.get("/models", response_model=ModelList)
async def models(session: SessionDep, principal: PrincipalDep) -> ModelList:
    """The agents this key may use, as models (`id` = the agent's name)."""
    return await service.list_models(session, principal)


@router.get(
    "/models/{model}",
    response_model=ModelCard,
    responses={404: {"description": "No agent of that name for this key (`model_not_found`)"}},
)
async def model(model: str, session: SessionDep, principal: PrincipalDep) -> ModelCard:
    """One agent as a model."""
    return await service.get_model(session, principal, model)


@router.post(
    "/chat/completions",
    response_model=None,
    responses={
        200: {"content": {"text/event-stream": {}, "application/json": {}}},
        404: {"description": "No agent of that name for this key (`model_not_found`)"},
        429: {"description": "The key's rate limit (`Retry-After`)"},
        502: {"description": "The run failed upstream (the model endpoint)"},
        503: {"description": "No LLM configured, or storage unavailable"},
    },
)
async def chat_completions(
    body: ChatCompletionRequest,
    session: SessionDep,
    runs: RunManagerDep,
    settings: SettingsDep,
    principal: PrincipalDep,
) -> StreamingResponse | JSONResponse:
    """Run the agent named by `model` on `messages` (the last one is the request); stream
    Chat Completions chunks (`stream: true`) or answer one completion. `X-Run-Id` names the
    run (replay: `GET /api/v1/runs/{id}/events`)."""
    principal = principal.with_user(body.user)
    agent = await service.agent_id(session, principal, body.model)
    if session.in_transaction():  # the run opens its own sessions: free this connection now
        await session.commit()
    return await service.complete(runs, principal, body, agent, ping_s=settings.sse_ping_s)
