"""The documentation's curl examples run as written against a live `quiver serve`.

The fenced bash blocks are taken as they are from the README's tour and from the manual's Admin API
and Chat pages (`docs/guide/`); only the server address is changed (a free port instead of 8000).
`curl` fails on any 4xx/5xx here, so a step the documentation shows but the gateway refuses fails
the test. The server runs like `make run`: SQLite, .venv/bin not on PATH.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.served import ADMIN_TOKEN, clean_env, free_port, quiver_serve

ROOT = Path(__file__).resolve().parents[1]
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PRELUDE = """set -euo pipefail
curl() { command curl --fail-with-body --show-error --max-time 60 "$@"; echo; }
"""


def bash_blocks(page: str, section: str | None = None) -> list[str]:
    """The ```bash blocks of a Markdown page (path from the root), or of one `## section`."""
    body = (ROOT / page).read_text()
    if section is not None:
        start = body.index(f"\n## {section}\n")
        end = body.find("\n## ", start + 1)
        body = body[start : end if end > 0 else None]
    return re.findall(r"```bash\n(.*?)```", body, flags=re.S)


async def _sales_db() -> str:
    name = await create_database("quiver_readme")
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TABLE orders (id int PRIMARY KEY, total numeric);"
            "INSERT INTO orders VALUES (1, 9.5), (2, 12);"
            "CREATE TABLE salaries (person text, amount int)"
        )
    finally:
        await conn.close()
    return name


@pytest.fixture
def sales_db() -> Iterator[str]:
    name = asyncio.run(_sales_db())
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        asyncio.run(drop_database(name))


@pytest.fixture
def llm_url(tmp_path: Path) -> Iterator[str]:
    """The scripted OpenAI-compatible model as its own process (its CLI), one fixed reply."""
    port = free_port()
    command = [sys.executable, "-m", "tests.fixtures.scripted_llm", "--port", str(port)]
    command += ["--reply", "PR #12 renamed the config loader."]
    proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "scripted LLM exited"
            assert time.monotonic() < deadline, "scripted LLM did not start"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def run_block(block: str, base_url: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = PRELUDE + block.replace("http://127.0.0.1:8000", base_url)
    names = "SKILL_ID CONNECTOR_ID DB_ID MCP_ID AGENT_ID KEY RUN_ID CONVERSATION_ID"
    script += f'\nfor v in {names}; do echo "$v=${{!v:-}}"; done\n'
    return subprocess.run(
        ["bash", "-c", script],
        env=clean_env(**env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.timeout(300)
def test_the_admin_and_chat_examples_run_as_written(
    sales_db: str, llm_url: str, tmp_path: Path
) -> None:
    [admin] = bash_blocks("docs/guide/admin-api.md")
    [chat] = bash_blocks("docs/guide/chat.md")
    assert "curl" in admin
    assert "curl" in chat
    server_env = clean_env(
        QUIVER_DATABASE_URL=f"sqlite:///{tmp_path / 'quiver.db'}",
        QUIVER_DATA_DIR=str(tmp_path),
        QUIVER_MCP_STDIO_COMMANDS="mcp-server-time",
        QUIVER_LLM_BASE_URL=llm_url,
        PATH="/usr/bin:/bin",  # like `make run`: .venv/bin is not on PATH
    )
    command = [sys.executable, "-m", "app.cli", "serve"]
    with quiver_serve(command, env=server_env, cwd=tmp_path) as served:
        done = run_block(
            admin + chat,
            served.base_url,
            tmp_path,
            QUIVER_ADMIN_TOKEN=ADMIN_TOKEN,
            SALES_DB=sales_db,
        )
        log = served.output()
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n--- server ---\n{log}"
    values = dict(
        line.split("=", 1) for line in done.stdout.splitlines() if re.match(r"^[A-Z_]+=", line)
    )
    ids = ("SKILL_ID", "CONNECTOR_ID", "DB_ID", "MCP_ID", "AGENT_ID", "RUN_ID", "CONVERSATION_ID")
    for name in ids:
        assert UUID.match(values[name]), (name, done.stdout)
    assert values["KEY"].startswith("qv_")
    out = done.stdout
    assert "s3cret" not in out, "credentials are write-only"
    bodies = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    tested = [b for b in bodies if set(b) == {"ok", "output", "error", "elapsed_ms"}]
    jira, query, clock = tested
    assert jira["ok"] is False, "jira.example.com is not reachable: a typed error, not a failure"
    assert query["ok"] is True
    assert json.loads(query["output"])["rows"] == [[2]]
    assert clock["ok"] is True
    assert json.loads(clock["output"])["timezone"] == "UTC"
    assert out.count("event: run_finished") == 2, "the chat, then its replay"
    assert "PR #12 renamed the config loader." in out
    conversation = bodies[-1]
    assert conversation["id"] == values["CONVERSATION_ID"]
    assert [m["role"] for m in conversation["messages"]][-2:] == ["user", "assistant"]
    refreshed = [b for b in bodies if b.get("name") == "time" and b.get("tools")]
    assert "get_current_time" in {t["name"] for t in refreshed[0]["tools"]}


@pytest.mark.timeout(300)
def test_the_readme_tour_runs_as_written(llm_url: str, tmp_path: Path) -> None:
    """The README's tour: GitHub's description imported, an agent, its preview, a chat."""
    [tour] = bash_blocks("README.md", "A five-minute tour")
    server_env = clean_env(
        QUIVER_DATABASE_URL=f"sqlite:///{tmp_path / 'quiver.db'}",
        QUIVER_DATA_DIR=str(tmp_path),
        QUIVER_LLM_BASE_URL=llm_url,
        PATH="/usr/bin:/bin",
    )
    command = [sys.executable, "-m", "app.cli", "serve"]
    with quiver_serve(command, env=server_env, cwd=tmp_path) as served:
        done = run_block(tour, served.base_url, ROOT, QUIVER_ADMIN_TOKEN=ADMIN_TOKEN)
        log = served.output()
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n--- server ---\n{log}"
    bodies = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    connector, preview = bodies[0], bodies[1]
    assert connector["name"] == "github"
    assert connector["action_count"] > 1000
    assert "connector" in preview["tools"]
    assert preview["tokens"] < 1000, "the README says about 320"
    assert preview["all_legacy"] > 300_000, "the README says about 367,000"
    assert preview["saved_ratio"] > 0.99
    assert "event: run_started" in done.stdout
    assert "PR #12 renamed the config loader." in done.stdout
    assert "event: run_finished" in done.stdout
