"""The OpenAI-compatible API on the chat tests' live Quiver (tests/chat/conftest.py)."""

from tests.chat.conftest import create_agent, live, live_url

__all__ = ["create_agent", "live", "live_url"]
