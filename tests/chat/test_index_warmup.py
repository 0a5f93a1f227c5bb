"""A live Quiver builds a large agent's tool index in the background (app/pipeline/warm.py,
index_builds.py): `/metrics` says when it is done (`quiver_tool_index_builds` 0), and from then
on the agent's selection is ranked by it, not by the quick word match used meanwhile."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.chat.conftest import CreateAgent, unique
from tests.pipeline.test_index_builds import GROUPS, NOUNS, VERBS


async def create_large_connector(live: httpx.AsyncClient) -> httpx.Response:
    """A connector of 320 legacy tools: above the 300 a request builds an index for itself."""
    actions = [
        {"name": f"{g}_{verb}_{noun}", "description": f"{verb.title()} a {noun} of the {g} group."}
        for g in GROUPS
        for verb in VERBS
        for noun in NOUNS
    ]
    body = {"name": unique("shop"), "base_url": "https://shop.example.test", "actions": actions}
    created = await live.post("/api/v1/connectors", json=body)
    assert created.status_code == 201, created.text
    return created


async def index_builds(live: httpx.AsyncClient) -> float:
    for line in (await live.get("/metrics")).text.splitlines():
        if line.startswith("quiver_tool_index_builds "):
            return float(line.split()[1])
    raise AssertionError("no quiver_tool_index_builds in /metrics")


async def await_warmed(live: httpx.AsyncClient, within_s: float = 60.0) -> None:
    """Wait until the app's warmer has nothing due or under way (a change woke it)."""
    deadline = time.monotonic() + within_s
    while await index_builds(live) > 0:
        assert time.monotonic() < deadline, f"the warm-up did not end within {within_s} s"
        await asyncio.sleep(0.1)


async def test_the_warm_up_builds_a_large_agents_index_and_says_when_it_is_done(
    live: httpx.AsyncClient, create_agent: CreateAgent
) -> None:
    created = await create_large_connector(live)
    agent = await create_agent(
        connector_ids=[created.json()["id"]],
        tool_categories=["connector"],
        model_config_json={"connector_tool_mode": "legacy", "tool_selection_max": 3},
    )
    await await_warmed(live)  # the agent's creation woke the warmer
    preview = await live.get(
        f"/api/v1/agents/{agent['id']}/toolset",
        params={"query": "archive the coupon of the cedar group"},
    )
    assert preview.status_code == 200, preview.text
    selection = preview.json()["selection"]
    assert selection["fallback"] is None
    assert selection["selected"][0].endswith("cedar_archive_coupon")
    assert len(selection["deferred"]) == 20
    assert selection["deferred_total"] == 320 - len(selection["selected"])
