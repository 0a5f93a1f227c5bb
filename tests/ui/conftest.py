"""Console browser tests: a live Quiver with the scripted LLM, and Debian's chromium."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright, expect

from app.config import Settings
from app.main import create_app
from tests.fixtures.live import serve_app
from tests.fixtures.scripted_llm import ScriptedLLM

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).parent / "screenshots"
# The console runs in the test process: late in the suite a full garbage collection of earlier
# tests' leftovers can stop it for seconds, so a page waits up to 20 s for what it expects (a
# failure still fails; it only waits longer for it).
expect.set_options(timeout=20_000)


@pytest.fixture(scope="module")
async def console_url(
    committing_settings: Settings, scripted_llm_session: ScriptedLLM
) -> AsyncIterator[str]:
    live_settings = committing_settings.model_copy(
        update={
            "llm_base_url": scripted_llm_session.base_url,
            "llm_max_retries": 0,
            "tool_timeout_s": 5.0,
            "sse_ping_s": 15.0,
        }
    )
    async with serve_app(create_app(live_settings)) as base_url:
        yield base_url


@pytest.fixture(scope="module")
async def chromium() -> AsyncIterator[Browser]:
    """Debian's chromium (never a downloaded browser); `.ci/run` installs it when missing."""
    if shutil.which(CHROMIUM) is None:
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS
