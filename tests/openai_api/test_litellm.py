"""LiteLLM's SDK with Quiver as an OpenAI-compatible provider (`openai/<agent name>`)."""

from __future__ import annotations

import os

# LiteLLM reads its model price map from the network at import unless told to use its copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx
import litellm
import pytest

from tests.chat.conftest import CreateAgent
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

litellm.telemetry = False
pytestmark = pytest.mark.filterwarnings(
    # LiteLLM's own import of its GitHub Copilot provider (a pydantic notice, not about Quiver).
    "ignore:.* using the `ReadOnly` qualifier:UserWarning",
    # LiteLLM's stream wrapper reads a pydantic attribute pydantic 2.11 deprecated.
    "ignore::pydantic.warnings.PydanticDeprecatedSince211",
)


async def test_litellm_completion_streamed_and_not(
    live: httpx.AsyncClient, live_url: str, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    provider = {
        "model": f"openai/{agent['name']}",
        "api_base": f"{live_url}/v1",
        "api_key": ADMIN_TOKEN,
    }
    scripted_llm.script(Turn(text="Hello from the agent.", usage=(12, 5)))
    response = await litellm.acompletion(
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hello"},
        ],
        **provider,
    )
    assert response.choices[0].message.content == "Hello from the agent."
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.total_tokens == 17
    assert [m["role"] for m in scripted_llm.requests[0]["messages"]] == ["system", "system", "user"]

    scripted_llm.script(Turn(text="Streamed through LiteLLM.", usage=(8, 4)))
    stream = await litellm.acompletion(
        messages=[{"role": "user", "content": "stream it"}],
        stream=True,
        stream_options={"include_usage": True},
        **provider,
    )
    pieces = []
    usage = None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if getattr(chunk, "usage", None):
            usage = chunk.usage
    assert "".join(pieces) == "Streamed through LiteLLM."
    assert usage is not None
    assert usage.total_tokens == 12


async def test_litellm_maps_quivers_errors(live_url: str, create_agent: CreateAgent) -> None:
    with pytest.raises(litellm.NotFoundError) as unknown:
        await litellm.acompletion(
            model="openai/no-such-agent",
            api_base=f"{live_url}/v1",
            api_key=ADMIN_TOKEN,
            messages=[{"role": "user", "content": "hi"}],
            num_retries=0,
        )
    assert "no-such-agent" in str(unknown.value)
    agent = await create_agent()
    with pytest.raises(litellm.AuthenticationError):
        await litellm.acompletion(
            model=f"openai/{agent['name']}",
            api_base=f"{live_url}/v1",
            api_key="qv_wrong",
            messages=[{"role": "user", "content": "hi"}],
            num_retries=0,
        )
