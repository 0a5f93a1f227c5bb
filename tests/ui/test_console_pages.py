"""The console runs the whole product, in Chromium against a live Quiver (issue #29).

From an empty Quiver: a knowledge base created and filled from the console, an agent created,
linked and configured (an approval rule in `model_config_json`, validated beside the field),
a chat in the playground whose two calls wait, one approved from the inbox with a reason and one
denied through the API (the live box follows), the run read back with its decisions; answers as
sanitised Markdown; a connector action tested and an MCP tool called from their pages.
Screenshots of each page go to tests/ui/screenshots/console/, or with QUIVER_DOCS_SCREENSHOTS=1
to docs/img/console/ (embedded in docs/guide/console.md).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, expect

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.mcp.servers import TIME_SERVER
from tests.ui.test_console_browser import sign_in

DOCS_IMG = (
    Path(__file__).resolve().parents[2] / "docs" / "img" / "console"
    if os.environ.get("QUIVER_DOCS_SCREENSHOTS")
    else Path(__file__).parent / "screenshots" / "console"
)
"""The docs' screenshots are rewritten only when asked (`QUIVER_DOCS_SCREENSHOTS=1`)."""
NAME_RULE = (
    "lowercase letters, digits, - and _, up to 64 characters, starting with a letter or digit"
)


@pytest.fixture(scope="module")
async def live(
    committing_settings: Settings, scripted_llm_session: ScriptedLLM
) -> AsyncIterator[str]:
    """Quiver with the scripted LLM, `mcp-server-time` allowed and loopback egress allowed
    (the connector under test is Quiver's own `/healthz`)."""
    settings = committing_settings.model_copy(
        update={
            "llm_base_url": scripted_llm_session.base_url,
            "llm_max_retries": 0,
            "tool_timeout_s": 10.0,
            "sse_ping_s": 15.0,
            "egress_allow_cidrs": ["127.0.0.0/8"],
            "mcp_stdio_commands": [TIME_SERVER],
        }
    )
    async with serve_app(create_app(settings)) as base_url:
        yield base_url


def api(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    )


async def shot(page: Page, name: str) -> None:
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(DOCS_IMG / f"{name}.png"), full_page=True)


async def admin_page(chromium: Browser, base: str) -> Page:
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await sign_in(page, base, ADMIN_TOKEN)
    return page


async def test_from_an_empty_quiver_to_an_approved_run(
    chromium: Browser, live: str, scripted_llm: ScriptedLLM
) -> None:
    tag = uuid.uuid4().hex[:6]
    kb_name, agent_name = f"handbook-{tag}", f"helper-{tag}"
    page = await admin_page(chromium, live)

    # A knowledge base, a document uploaded, searched; a refused upload is a message.
    await page.goto(f"{live}/ui/knowledge")
    await page.get_by_test_id("kb-name").fill(kb_name)
    await page.get_by_test_id("kb-create").click()
    await expect(page.get_by_test_id("kb-heading")).to_have_text(kb_name)
    document = f"# Launch\n\nThe launch code of {tag} is PELICAN-{tag}.\n".encode()
    upload = {"name": "launch.md", "mimeType": "text/markdown", "buffer": document}
    await page.get_by_test_id("kb-file").set_input_files(upload)
    await page.get_by_test_id("kb-upload").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("launch.md: ready")
    await expect(page.get_by_test_id("kb-document-status")).to_have_text("ready")
    await page.get_by_test_id("kb-file").set_input_files(upload)
    await page.get_by_test_id("kb-upload").click()
    await expect(page.get_by_test_id("error")).to_contain_text("already")
    await expect(page.get_by_test_id("kb-document")).to_have_count(1)
    await page.get_by_test_id("kb-search").fill("launch code")
    await page.get_by_test_id("kb-search-submit").click()
    await expect(page.get_by_test_id("kb-hit").first).to_contain_text(f"PELICAN-{tag}")
    await shot(page, "knowledge-base")
    await page.goto(f"{live}/ui/knowledge")
    await expect(page.get_by_test_id("kb-row").filter(has_text=kb_name)).to_have_count(1)
    await shot(page, "knowledge")

    # An agent: a bad name is a sentence, then created, linked and configured.
    await page.goto(f"{live}/ui/agents")
    await page.get_by_test_id("agent-name").fill("Not A Name!")
    await page.get_by_test_id("agent-create").click()
    await expect(page.get_by_test_id("error")).to_contain_text(NAME_RULE)
    await page.get_by_test_id("agent-name").fill(agent_name)
    await page.get_by_test_id("agent-create").click()
    await expect(page.get_by_test_id("agent-name-heading")).to_have_text(agent_name)
    agent_id = page.url.rsplit("/", 1)[-1].split("?")[0]
    await page.get_by_test_id(f"link-{kb_name}").check()
    await page.get_by_test_id("links-save").click()
    await expect(page.get_by_test_id("notice")).to_have_text("linked resources saved")
    await expect(page.get_by_test_id(f"link-{kb_name}")).to_be_checked()

    config = page.get_by_test_id("agent-config")
    await config.fill('{"approval": {"tools": ["knowledge"]')
    await page.get_by_test_id("agent-settings-save").click()
    await expect(page.get_by_test_id("agent-config-error")).to_contain_text("not valid JSON")
    await expect(config).to_have_value('{"approval": {"tools": ["knowledge"]')
    await config.fill('{"approval": {"tools": ["knowledge"], "timeout_s": -1}}')
    await page.get_by_test_id("agent-settings-save").click()
    await expect(page.get_by_test_id("agent-config-error")).to_contain_text("timeout_s")
    await shot(page, "agent-settings-error")
    await page.get_by_test_id("agent-instructions").fill("Answer from the handbook.")
    await config.fill('{"approval": {"tools": ["knowledge"], "timeout_s": 120}}')
    await page.get_by_test_id("agent-settings-save").click()
    await expect(page.get_by_test_id("notice")).to_have_text("settings saved")
    await expect(page.get_by_test_id("agent-config-error")).to_have_count(0)
    async with api(live) as client:
        stored = (await client.get(f"/api/v1/agents/{agent_id}")).json()
    assert stored["model_config_json"] == {"approval": {"tools": ["knowledge"], "timeout_s": 120}}
    assert stored["instructions"] == "Answer from the handbook."
    assert len(stored["knowledge_base_ids"]) == 1

    # The playground: two calls wait; the inbox approves one with a reason, the API denies one.
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("first", "knowledge", {"query": f"launch code {tag}"}),
                ("second", "knowledge", {"query": f"payroll {tag}"}),
            ]
        ),
        Turn(text=f"The code is **PELICAN-{tag}**.\n\n- found in the handbook"),
    )
    await page.goto(f"{live}/ui/playground?agent={agent_id}")
    await page.get_by_test_id("chat-input").fill("What is the launch code?")
    await page.get_by_test_id("chat-send").click()
    boxes = page.get_by_test_id("approval")
    await expect(boxes).to_have_count(2)
    run_id = await page.get_attribute("#playground", "data-run-id")
    assert run_id

    inbox = await page.context.new_page()
    await inbox.goto(f"{live}/ui/approvals")
    rows = inbox.get_by_test_id("approval-row").filter(has_text=tag)
    await expect(rows).to_have_count(2)
    await expect(rows.first.get_by_test_id("approval-agent")).to_contain_text(agent_name)
    await shot(inbox, "approvals")
    async with api(live) as client:
        pending = (await client.get("/api/v1/approvals", params={"status": "pending"})).json()
        second = next(a for a in pending["items"] if f"payroll {tag}" in json.dumps(a))
        denied = await client.post(
            f"/api/v1/runs/{run_id}/approvals/{second['id']}",
            json={"decision": "deny", "reason": "not payroll"},
        )
        assert denied.status_code == 200, denied.text
    # The live box follows a decision taken elsewhere.
    payroll_box = boxes.filter(has_text=f"payroll {tag}")
    await expect(payroll_box.get_by_test_id("approval-decision")).to_contain_text("denied")
    await expect(payroll_box.get_by_test_id("approval-decision")).to_contain_text("not payroll")
    await expect(payroll_box.get_by_test_id("approval-approve")).to_have_count(0)
    # The stale inbox row answers the 409 as a message.
    stale = rows.filter(has_text=f"payroll {tag}")
    await stale.get_by_test_id("approval-approve").click()
    await expect(inbox.get_by_test_id("error")).to_contain_text("already denied")
    launch = inbox.get_by_test_id("approval-row").filter(has_text=f"launch code {tag}")
    await launch.get_by_test_id("approval-reason").fill("handbook lookups are fine")
    await launch.get_by_test_id("approval-approve").click()
    await expect(inbox.get_by_test_id("notice")).to_contain_text("knowledge: approved")

    await expect(page.get_by_test_id("chat-status")).to_contain_text("Run completed")
    launch_box = boxes.filter(has_text=f"launch code {tag}")
    await expect(launch_box.get_by_test_id("approval-decision")).to_contain_text(
        "handbook lookups are fine"
    )
    answer = page.get_by_test_id("chat-answer")
    await expect(answer.locator("strong")).to_have_text(f"PELICAN-{tag}")
    await expect(answer.locator("li")).to_have_text("found in the handbook")
    await shot(page, "playground")
    observations = {
        m["tool_call_id"]: m["content"]
        for m in scripted_llm.requests[-1]["messages"]
        if m["role"] == "tool"
    }
    assert f"PELICAN-{tag}" in observations["first"]
    assert "Denied by a person: not payroll" in observations["second"]

    # Reading the run: decisions replayed as decided, no live buttons; listed by agent name.
    await page.goto(f"{live}/ui/runs/{run_id}")
    await expect(page.get_by_test_id("chat-status")).to_contain_text("Run completed")
    decisions = page.get_by_test_id("approval-decision")
    await expect(decisions).to_have_count(2)
    await expect(decisions.filter(has_text="approved")).to_contain_text("handbook lookups")
    await expect(page.get_by_test_id("approval-approve")).to_have_count(0)
    await expect(page.get_by_test_id("chat-answer").locator("strong")).to_have_text(
        f"PELICAN-{tag}"
    )
    await shot(page, "run")
    await page.goto(f"{live}/ui/runs")
    row = page.locator(f'[data-run-id="{run_id}"]')
    await expect(row.get_by_test_id("run-agent")).to_have_text(agent_name)
    await expect(row.get_by_test_id("run-kind")).to_have_text("chat")
    await page.goto(f"{live}/ui/tool-calls?run_id={run_id}")
    first_date = page.locator("td.nowrap").first
    await expect(first_date).to_be_visible()
    assert await first_date.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
    await inbox.goto(f"{live}/ui/approvals?status=approved")
    done_row = inbox.get_by_test_id("approval-row").filter(has_text=f"launch code {tag}")
    await expect(done_row.get_by_test_id("approval-decision")).to_contain_text("approved")
    await expect(done_row.get_by_test_id("approval-approve")).to_have_count(0)
    await page.context.close()


async def test_markdown_answers_are_sanitised(
    chromium: Browser, live: str, scripted_llm: ScriptedLLM
) -> None:
    """An answer carrying an `<img onerror>`, a `<script>` and a `javascript:` link renders its
    Markdown but none of them: no handler attribute, no script, nothing runs."""
    tag = uuid.uuid4().hex[:6]
    async with api(live) as client:
        agent = await client.post("/api/v1/agents", json={"name": f"md-{tag}"})
        assert agent.status_code == 201, agent.text
    hostile = (
        "# Title\n\n**bold** and `code`\n\n"
        '<img src="/nope.png" onerror="window.__xss = 1; document.title = \'pwned\'">\n\n'
        "<script>window.__xss = 2</script>\n\n"
        "[click](javascript:window.__xss=3)\n"
    )
    scripted_llm.script(Turn(text=hostile))
    page = await admin_page(chromium, live)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    await page.goto(f"{live}/ui/playground?agent={agent.json()['id']}")
    await page.get_by_test_id("chat-input").fill("hello")
    await page.get_by_test_id("chat-send").click()
    await expect(page.get_by_test_id("chat-status")).to_contain_text("Run completed")
    answer = page.get_by_test_id("chat-answer")
    await expect(answer.locator("h1")).to_have_text("Title")
    await expect(answer.locator("strong")).to_have_text("bold")
    assert await answer.locator("[onerror], script, [href^='javascript']").count() == 0
    await page.wait_for_timeout(300)  # time for a broken image's error event
    assert await page.evaluate("window.__xss") is None
    assert await page.title() != "pwned"
    assert dialogs == []
    await page.context.close()


async def test_a_delegation_is_a_step_linking_the_child_run(
    chromium: Browser, live: str, scripted_llm: ScriptedLLM
) -> None:
    tag = uuid.uuid4().hex[:6]
    async with api(live) as client:
        child = await client.post("/api/v1/agents", json={"name": f"child-{tag}"})
        assert child.status_code == 201, child.text
        parent = await client.post(
            "/api/v1/agents",
            json={"name": f"parent-{tag}", "delegate_ids": [child.json()["id"]]},
        )
        assert parent.status_code == 201, parent.text
    scripted_llm.script(
        Turn(tool_calls=[("d1", "call_agent", {"agent": f"child-{tag}", "task": "say hi"})]),
        Turn(text="hi from the child"),
        Turn(text="The child said hi."),
    )
    page = await admin_page(chromium, live)
    await page.goto(f"{live}/ui/playground?agent={parent.json()['id']}")
    await page.get_by_test_id("chat-input").fill("delegate")
    await page.get_by_test_id("chat-send").click()
    await expect(page.get_by_test_id("chat-status")).to_contain_text("Run completed")
    step = page.get_by_test_id("delegation-step")
    await expect(step).to_have_count(1)
    await expect(step).to_contain_text(f"delegated to child-{tag}")
    await expect(step).to_contain_text("completed")
    await step.get_by_test_id("delegation-link").click()
    await expect(page.get_by_test_id("chat-answer")).to_have_text("hi from the child")
    await page.goto(f"{live}/ui/runs")
    await expect(page.get_by_test_id("run-kind").filter(has_text="delegated").first).to_be_visible()
    await page.context.close()


async def test_the_inbox_names_the_delegate_of_a_delegated_call(
    chromium: Browser, live: str, scripted_llm: ScriptedLLM
) -> None:
    """A call waiting inside a delegation shows the delegate agent, its run and the parent run;
    approved from the inbox, the parent's playground box follows."""
    tag = uuid.uuid4().hex[:6]
    async with api(live) as client:
        skill = await client.post("/api/v1/skills/import", json={"document": skill_md(tag)})
        assert skill.status_code == 201, skill.text
        child = await client.post(
            "/api/v1/agents",
            json={
                "name": f"clerk-{tag}",
                "skill_ids": [skill.json()["id"]],
                "model_config_json": {"approval": {"tools": ["read_skill"]}},
            },
        )
        assert child.status_code == 201, child.text
        parent = await client.post(
            "/api/v1/agents",
            json={"name": f"boss-{tag}", "delegate_ids": [child.json()["id"]]},
        )
        assert parent.status_code == 201, parent.text
    scripted_llm.script(
        Turn(tool_calls=[("d1", "call_agent", {"agent": f"clerk-{tag}", "task": "read it"})]),
        Turn(tool_calls=[("r1", "read_skill", {"name": f"proc-{tag}"})]),
        Turn(text="read"),
        Turn(text="The clerk read it."),
    )
    page = await admin_page(chromium, live)
    await page.goto(f"{live}/ui/playground?agent={parent.json()['id']}")
    await page.get_by_test_id("chat-input").fill("delegate a read")
    await page.get_by_test_id("chat-send").click()
    await expect(page.get_by_test_id("approval")).to_have_count(1)
    parent_run = await page.get_attribute("#playground", "data-run-id")
    inbox = await page.context.new_page()
    await inbox.goto(f"{live}/ui/approvals")
    row = inbox.get_by_test_id("approval-row").filter(has_text=f"proc-{tag}")
    await expect(row.get_by_test_id("approval-agent")).to_contain_text(f"clerk-{tag}")
    parent_link = row.get_by_test_id("approval-parent-run")
    await expect(parent_link).to_have_attribute("href", f"/ui/runs/{parent_run}")
    child_link = await row.get_by_test_id("approval-run").get_attribute("href")
    assert child_link
    assert child_link != f"/ui/runs/{parent_run}"
    await row.get_by_test_id("approval-reason").fill("fine")
    await row.get_by_test_id("approval-approve").click()
    await expect(inbox.get_by_test_id("notice")).to_contain_text("read_skill: approved")
    await expect(page.get_by_test_id("chat-status")).to_contain_text("Run completed")
    await expect(page.get_by_test_id("approval-decision")).to_contain_text("approved")
    await expect(page.get_by_test_id("chat-answer").last).to_have_text("The clerk read it.")
    await page.context.close()


def skill_md(tag: str) -> str:
    return f"---\nname: proc-{tag}\ndescription: A procedure\n---\n# Procedure\n\nDo it {tag}.\n"


async def test_connector_test_and_mcp_call_forms(chromium: Browser, live: str) -> None:
    tag = uuid.uuid4().hex[:6]
    openapi = (
        f"openapi: 3.0.3\ninfo: {{title: Health, version: '1'}}\nservers: [{{url: '{live}'}}]\n"
        "paths:\n  /healthz:\n    get:\n      operationId: health\n"
        "      responses: {'200': {description: ok}}\n"
    )
    async with api(live) as client:
        imported = await client.post(
            "/api/v1/connectors/import", json={"document": openapi, "name": f"health-{tag}"}
        )
        assert imported.status_code == 201, imported.text
        server = await client.post(
            "/api/v1/mcp-servers",
            json={"name": f"time-{tag}", "transport": "stdio", "command": TIME_SERVER},
        )
        assert server.status_code == 201, server.text
    page = await admin_page(chromium, live)
    await page.goto(f"{live}/ui/resources/connectors/{imported.json()['id']}")
    await page.get_by_test_id("action-test-params").fill("[1]")
    await page.get_by_test_id("action-test-submit").click()
    await expect(page.get_by_test_id("error")).to_contain_text("must be a JSON object")
    await page.get_by_test_id("action-test-name").select_option("health")
    await page.get_by_test_id("action-test-params").fill("{}")
    await page.get_by_test_id("action-test-submit").click()
    await expect(page.get_by_test_id("tool-result-ok")).to_have_text("ok")
    await expect(page.get_by_test_id("tool-result-output")).to_contain_text('"ok"')
    await expect(page.get_by_test_id("tool-result-elapsed")).to_contain_text("ms")
    await shot(page, "connector-test")

    await page.goto(f"{live}/ui/resources")
    card = page.get_by_test_id("mcp-card").filter(has_text=f"time-{tag}")
    await card.get_by_test_id("mcp-refresh").click()
    await expect(page.get_by_test_id("notice")).to_contain_text(f"time-{tag}")
    card = page.get_by_test_id("mcp-card").filter(has_text=f"time-{tag}")
    await card.get_by_test_id("mcp-call-tool").select_option("get_current_time")
    await card.get_by_test_id("mcp-call-args").fill('{"timezone": "UTC"}')
    await card.get_by_test_id("mcp-call-submit").click()
    await expect(page.get_by_test_id("tool-result-ok")).to_have_text("ok")
    await expect(page.get_by_test_id("tool-result-output")).to_contain_text("UTC")
    await shot(page, "mcp-call")
    card = page.get_by_test_id("mcp-card").filter(has_text=f"time-{tag}")
    await card.get_by_test_id("mcp-call-args").fill('{"timezone": "Not/AZone"}')
    await card.get_by_test_id("mcp-call-submit").click()
    await expect(page.get_by_test_id("tool-result-ok")).to_have_text("error")
    await page.context.close()


async def test_small_fixes(chromium: Browser, live: str) -> None:
    """The 403 page keeps the navigation; a chat key's inbox; the favicon is served."""
    async with api(live) as client:
        created = await client.post("/api/v1/api-keys", json={"name": "pages", "scopes": ["chat"]})
        key = created.json()["key"]
    context = await chromium.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    await sign_in(page, live, key)
    response = await page.goto(f"{live}/ui/knowledge")
    assert response is not None
    assert response.status == 403
    await expect(page.get_by_role("navigation", name="Console")).to_be_visible()
    await expect(page.get_by_test_id("nav-approvals")).to_be_visible()
    await expect(page.get_by_test_id("nav-knowledge")).to_have_count(0)
    await page.goto(f"{live}/ui/approvals")
    await expect(page.get_by_test_id("approvals-empty")).to_be_visible()
    icon = await page.get_attribute('link[rel="icon"]', "href")
    assert icon == "/ui/static/favicon.svg"
    served = await page.request.get(f"{live}{icon}")
    assert served.status == 200
    assert served.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in await served.text()
    assert "default-src 'self'" in served.headers["content-security-policy"]
    await context.close()
