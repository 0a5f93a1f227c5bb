"""The console in a real browser (Debian's chromium through playwright) against a live Quiver.

One journey per key kind: an admin imports a SKILL.md and an OpenAPI document, links them to
an agent, reads the tool-set preview, chats (streamed answer, a tool step), reloads to resume
from the journal, cancels a run, opens a run from the runs list and signs out; a chat key
cannot open the resources pages. Screenshots of every page go to tests/ui/screenshots/.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from app.ui import picker
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

OPENAPI = """openapi: 3.0.3
info: {title: Invoices, version: "1.0"}
servers: [{url: "http://127.0.0.1:9/api"}]
paths:
  /invoices:
    get:
      operationId: list_invoices
      summary: List the open invoices
      parameters:
        - {name: status, in: query, schema: {type: string}}
      responses: {"200": {description: ok}}
  /invoices/{id}:
    get:
      operationId: get_invoice
      summary: Get one invoice
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
      responses: {"200": {description: ok}}
"""


def skill_md(name: str) -> str:
    return (
        f"---\nname: {name}\ndescription: How to close an invoice\n---\n"
        "# Closing an invoice\n\nCheck the balance is zero, then mark it closed.\n"
    )


async def shot(page: Page, folder: Path, name: str) -> None:
    await page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


async def sign_in(page: Page, base: str, key: str) -> None:
    await page.goto(f"{base}/ui/login")
    await page.get_by_label("API key").fill(key)
    await page.get_by_test_id("login-submit").click()


async def test_admin_journey(
    chromium: Browser,
    console_url: str,
    scripted_llm: ScriptedLLM,
    screenshots: Path,
    tmp_path: Path,
) -> None:
    suffix = uuid.uuid4().hex[:6]
    skill, agent_name = f"close_invoice_{suffix}", f"billing_{suffix}"
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.goto(f"{console_url}/ui/agents")
    await expect(page).to_have_url(f"{console_url}/ui/login")
    await shot(page, screenshots, "login")
    await sign_in(page, console_url, ADMIN_TOKEN)
    await expect(page).to_have_url(f"{console_url}/ui/agents")

    # resources: a SKILL.md pasted, an OpenAPI document from a file
    await page.get_by_role("link", name="Resources").click()
    skill_form = page.get_by_test_id("import-skill")
    await skill_form.get_by_test_id("import-skill-document").fill(skill_md(skill))
    await skill_form.get_by_test_id("import-skill-submit").click()
    await expect(page.get_by_test_id("notice")).to_contain_text(f"skill {skill} imported")
    document = tmp_path / "invoices.yaml"
    document.write_text(OPENAPI)
    openapi_form = page.get_by_test_id("import-openapi")
    await openapi_form.get_by_test_id("import-openapi-file").set_input_files(str(document))
    await openapi_form.get_by_test_id("import-openapi-name").fill(f"invoices_{suffix}")
    await openapi_form.get_by_test_id("import-openapi-submit").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("imported with 2 actions")
    await expect(page.get_by_test_id("action-row")).to_have_count(2)
    await shot(page, screenshots, "connector")
    await page.goto(f"{console_url}/ui/resources")
    await expect(page.get_by_test_id("skill-row").filter(has_text=skill)).to_have_count(1)
    await shot(page, screenshots, "resources")

    # an agent, linked to both
    await page.get_by_role("link", name="Agents").click()
    await page.get_by_test_id("agent-name").fill(agent_name)
    await page.get_by_test_id("agent-create").click()
    await expect(page.get_by_test_id("agent-name-heading")).to_have_text(agent_name)
    await page.get_by_test_id(f"link-{skill}").check()
    await page.get_by_test_id(f"link-invoices_{suffix}").check()
    await page.get_by_test_id("links-save").click()
    await expect(page.get_by_test_id("notice")).to_have_text("linked resources saved")
    agent_id = page.url.split("/ui/agents/")[1].split("?")[0]

    # the preview's numbers are the API's
    await page.get_by_test_id("toolset-query").fill("close invoice 7")
    await page.get_by_test_id("toolset-submit").click()
    await expect(page).to_have_url(re.compile(r"\?query=close(\+|%20)invoice(\+|%20)7$"))
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    ) as api:
        preview = (
            await api.get(f"/api/v1/agents/{agent_id}/toolset", params={"query": "close invoice 7"})
        ).json()
    progressive = await page.get_by_test_id("toolset-tokens-progressive").inner_text()
    legacy = await page.get_by_test_id("toolset-tokens-legacy").inner_text()
    assert int(progressive) == preview["tokens"]["total"]
    assert int(legacy) == preview["legacy_tokens"]["total"]
    assert int(legacy) > 0
    assert int(progressive) > 0
    tools = page.get_by_test_id("toolset-tool")
    await expect(tools).to_have_count(len(preview["tools"]))
    await tools.first.locator("summary").click()
    await expect(tools.first.locator("pre")).to_contain_text('"function"')
    await expect(page.get_by_test_id("toolset-chart")).to_be_visible()
    await shot(page, screenshots, "agent")

    # chat: a tool step, then a streamed answer
    scripted_llm.script(
        Turn(tool_calls=[("call_1", "read_skill", {"name": skill})]),
        Turn(text="Invoice 7 is closed: the balance was zero.", token_delay_s=0.02),
    )
    await page.goto(f"{console_url}/ui/playground?agent={agent_id}")
    await expect(page.get_by_test_id("chat-agent")).to_have_value(agent_id)
    await page.get_by_test_id("chat-input").fill("Close invoice 7")
    await page.get_by_test_id("chat-send").click()
    step = page.get_by_test_id("chat-step")
    await expect(step).to_have_count(1)
    await expect(page.get_by_test_id("chat-answer")).to_have_text(
        "Invoice 7 is closed: the balance was zero."
    )
    await expect(page.get_by_test_id("chat-status")).to_contain_text("Run completed")
    await step.locator("summary").click()
    await expect(step.get_by_test_id("chat-step-args")).to_contain_text(skill)
    await expect(step.get_by_test_id("chat-step-result")).to_contain_text("mark it closed")
    await shot(page, screenshots, "playground")
    assert "?run=" in page.url
    run_id = page.url.split("?run=")[1]

    # reload: the run comes back from the journal
    await page.reload()
    await expect(page.get_by_test_id("chat-answer")).to_have_text(
        "Invoice 7 is closed: the balance was zero."
    )
    await expect(page.get_by_test_id("chat-step")).to_have_count(1)

    # cancel a slow run
    scripted_llm.script(Turn(text="word " * 400, token_delay_s=0.05))
    await page.get_by_test_id("chat-new").click()
    await page.get_by_test_id("chat-input").fill("Write a long essay")
    await page.get_by_test_id("chat-send").click()
    await expect(page.get_by_test_id("chat-answer")).to_contain_text("word")
    await expect(page.get_by_test_id("chat-cancel")).to_be_enabled()
    await page.get_by_test_id("chat-cancel").click()
    await expect(page.get_by_test_id("chat-status")).to_contain_text(
        "Run cancelled", timeout=15_000
    )

    # runs list → the first run's page replays its journal
    await page.get_by_role("link", name="Runs").click()
    await expect(page.get_by_test_id("run-row").first).to_be_visible()
    await shot(page, screenshots, "runs")
    await page.get_by_test_id("run-status-filter").select_option("completed")
    await page.get_by_test_id("run-filter-submit").click()
    row = page.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')
    await expect(row).to_have_count(1)
    await expect(page.locator('[data-testid="run-row"][data-status="cancelled"]')).to_have_count(0)
    await row.get_by_role("link").click()
    await expect(page.get_by_test_id("run-status")).to_have_text("completed")
    await expect(page.get_by_test_id("chat-prompt")).to_have_text("Close invoice 7")
    await expect(page.get_by_test_id("chat-answer")).to_have_text(
        "Invoice 7 is closed: the balance was zero."
    )
    await expect(page.get_by_test_id("chat-step")).to_have_count(1)
    await shot(page, screenshots, "run")

    await page.get_by_role("link", name="Tool calls of this run").click()
    await expect(page.get_by_test_id("toolcall-row")).to_have_count(1)
    await expect(page.get_by_test_id("toolcall-row")).to_contain_text("read_skill")
    await shot(page, screenshots, "tool-calls")

    # 390 px wide: the pages still fit
    await page.set_viewport_size({"width": 390, "height": 844})
    for path, name in ((f"/ui/agents/{agent_id}", "agent-390"), ("/ui/runs", "runs-390")):
        await page.goto(f"{console_url}{path}")
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} overflows at 390 px: {width}"
        await shot(page, screenshots, name)

    await page.get_by_test_id("sign-out").click()
    await expect(page).to_have_url(f"{console_url}/ui/login")
    await page.goto(f"{console_url}/ui/runs")
    await expect(page).to_have_url(f"{console_url}/ui/login")
    await context.close()


async def test_a_chat_key_gets_the_playground_but_not_the_resources(
    chromium: Browser, console_url: str, scripted_llm: ScriptedLLM, screenshots: Path
) -> None:
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    ) as api:
        created = await api.post("/api/v1/api-keys", json={"name": "ui", "scopes": ["chat"]})
        key = created.json()["key"]
    context = await chromium.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    await sign_in(page, console_url, key)
    await expect(page).to_have_url(f"{console_url}/ui/playground")
    await expect(page.get_by_role("link", name="Resources")).to_have_count(0)
    response = await page.goto(f"{console_url}/ui/resources")
    assert response is not None
    assert response.status == 403
    await expect(page.get_by_test_id("forbidden")).to_contain_text("scope 'admin'")
    await shot(page, screenshots, "forbidden")
    await context.close()


async def test_approvals_are_decided_from_the_playground(
    chromium: Browser, console_url: str, scripted_llm: ScriptedLLM, screenshots: Path
) -> None:
    """Two calls of one turn wait for a person (the agent's approval globs); the playground
    shows Approve/Deny for each, the buttons decide them through the real approval route, the
    approved call runs, the denied one reaches the model as `Denied by a person`."""
    tag = uuid.uuid4().hex[:6]
    kept, refused = f"keep-{tag}", f"refuse-{tag}"
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as api:
        skill_ids = []
        for name in (kept, refused):
            imported = await api.post("/api/v1/skills/import", json={"document": skill_md(name)})
            assert imported.status_code == 201, imported.text
            skill_ids.append(imported.json()["id"])
        agent = await api.post(
            "/api/v1/agents",
            json={
                "name": f"appr-{tag}",
                "skill_ids": skill_ids,
                "model_config_json": {"approval": {"tools": ["read_skill"]}},
            },
        )
        assert agent.status_code == 201, agent.text
        agent_id = agent.json()["id"]
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("first", "read_skill", {"name": kept}),
                ("second", "read_skill", {"name": refused}),
            ]
        ),
        Turn(text="One read, one refused."),
    )
    context = await chromium.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    await sign_in(page, console_url, ADMIN_TOKEN)
    await page.goto(f"{console_url}/ui/playground?agent={agent_id}")
    await page.get_by_test_id("chat-agent").select_option(agent_id)
    await page.get_by_test_id("chat-input").fill("Read both procedures")
    await page.get_by_test_id("chat-send").click()
    cards = page.get_by_test_id("approval")
    await expect(cards).to_have_count(2)
    await shot(page, screenshots, "approval")
    await cards.filter(has_text=kept).get_by_test_id("approval-approve").click()
    await cards.filter(has_text=refused).get_by_test_id("approval-deny").click()
    await expect(page.get_by_test_id("chat-answer")).to_have_text("One read, one refused.")
    await expect(page.get_by_test_id("chat-status")).to_contain_text("Run completed")
    await shot(page, screenshots, "approval-decided")
    await context.close()
    observations = {
        m["tool_call_id"]: m["content"]
        for m in scripted_llm.requests[-1]["messages"]
        if m["role"] == "tool"
    }
    assert "mark it closed" in observations["first"]
    assert "Denied by a person" in observations["second"]
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as api:
        decided = (await api.get("/api/v1/approvals", params={"limit": 200})).json()["items"]
    statuses = {a["call_id"]: a["status"] for a in decided if tag in str(a["arguments"])}
    assert statuses == {"first": "approved", "second": "denied"}


async def test_lists_and_forms_work_without_javascript(
    chromium: Browser, console_url: str, scripted_llm: ScriptedLLM, screenshots: Path
) -> None:
    name = f"nojs_{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as api:
        agent = await api.post("/api/v1/agents", json={"name": name})
        await api.post("/api/v1/agents", json={"name": f"{name}_peer"})
        async with api.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent.json()["id"], "message": "hi"}
        ) as response:
            run_id = response.headers["X-Run-Id"]
            await response.aread()
    context = await chromium.new_context(
        viewport={"width": 390, "height": 844}, java_script_enabled=False
    )
    page = await context.new_page()
    await sign_in(page, console_url, ADMIN_TOKEN)
    await expect(page).to_have_url(f"{console_url}/ui/agents")
    await expect(page.get_by_test_id("agent-row").first).to_be_visible()
    await page.goto(f"{console_url}/ui/runs")
    await expect(page.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')).to_have_count(1)
    await page.goto(f"{console_url}/ui/agents/{agent.json()['id']}")
    await page.get_by_test_id("toolset-query").fill("what time is it")
    await page.get_by_test_id("toolset-submit").click()  # a plain GET form without htmx
    await expect(page).to_have_url(re.compile(r"\?query=what\+time\+is\+it$"))
    await expect(page.get_by_test_id("toolset-tool").first).to_be_visible()
    # the linked-resources search: a plain GET of the page, the preview's query kept
    await page.get_by_test_id("pick-find-delegates").fill(f"{name}_pe")
    await page.get_by_test_id("pick-find-submit-delegates").click()
    await expect(page).to_have_url(
        re.compile(rf"\?query=what\+time\+is\+it&find_delegates={name}_pe#links$")
    )
    await expect(page.get_by_test_id(f"link-{name}_peer")).not_to_be_checked()
    await expect(page.get_by_test_id("pick-find-delegates")).to_have_value(f"{name}_pe")
    await shot(page, screenshots, "agent-nojs-390")
    await context.close()


async def test_the_link_picker_searches_as_you_type(
    chromium: Browser, console_url: str, screenshots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console runs in this process: with the picker's limit at 2, the oldest of four
    agents is not on the page until its name is typed; a box ticked before the search stays
    ticked, and saving keeps the earlier link."""
    monkeypatch.setattr(picker, "PICK", 2)
    tag = uuid.uuid4().hex[:6]
    async with httpx.AsyncClient(
        base_url=console_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as api:
        hub = (await api.post("/api/v1/agents", json={"name": f"hub_{tag}"})).json()
        ids = [
            (await api.post("/api/v1/agents", json={"name": f"peer_{tag}_{i}"})).json()["id"]
            for i in range(4)
        ]
        await api.patch(f"/api/v1/agents/{hub['id']}", json={"delegate_ids": [ids[1]]})
        context = await chromium.new_context(viewport={"width": 1280, "height": 900})
        page = await context.new_page()
        await sign_in(page, console_url, ADMIN_TOKEN)
        await expect(page).to_have_url(f"{console_url}/ui/agents")
        await page.goto(f"{console_url}/ui/agents/{hub['id']}")
        oldest = page.get_by_test_id(f"link-peer_{tag}_0")
        await expect(page.get_by_test_id(f"link-peer_{tag}_1")).to_be_checked()
        await expect(page.get_by_test_id("pick-more-delegates")).to_be_visible()
        await expect(oldest).to_have_count(0)
        await page.get_by_test_id(f"link-peer_{tag}_3").check()  # ticked, not saved yet
        await page.get_by_test_id("pick-find-delegates").press_sequentially(f"{tag}_0", delay=30)
        await expect(oldest).not_to_be_checked()
        await expect(page).to_have_url(f"{console_url}/ui/agents/{hub['id']}")  # no reload
        await expect(page.get_by_test_id(f"link-peer_{tag}_1")).to_be_checked()
        await expect(page.get_by_test_id(f"link-peer_{tag}_3")).to_be_checked()
        await expect(page.get_by_test_id(f"link-peer_{tag}_2")).to_have_count(0)
        await oldest.check()
        await shot(page, screenshots, "agent-picker")
        await page.get_by_test_id("links-save").click()
        await expect(page.get_by_test_id("notice")).to_have_text("linked resources saved")
        await expect(page.get_by_test_id(f"link-peer_{tag}_0")).to_be_checked()
        await context.close()
        saved = (await api.get(f"/api/v1/agents/{hub['id']}")).json()
    assert sorted(saved["delegate_ids"]) == sorted([ids[0], ids[1], ids[3]])
