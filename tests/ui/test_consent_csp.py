"""The consent page's CSP lets its answer redirect to the client's own origin and nothing else."""

from __future__ import annotations

import pytest

from app.ui.pages_oauth import _form_action


@pytest.mark.parametrize(
    ("redirect_uri", "allowed"),
    [
        ("http://127.0.0.1:9/callback", "form-action 'self' http://127.0.0.1:9"),
        ("https://claude.ai/api/mcp/auth_callback", "form-action 'self' https://claude.ai"),
        (
            "cursor://anysphere.cursor-retrieval/cb",
            "form-action 'self' cursor://anysphere.cursor-retrieval",
        ),
        ("myapp:/cb", "form-action 'self' myapp:"),
        ("https://a.example;script-src *", "form-action 'self'"),  # cannot extend the policy
    ],
)
def test_form_action_names_the_client_origin_only(redirect_uri: str, allowed: str) -> None:
    policy = _form_action(redirect_uri)
    assert policy.endswith(allowed)
    assert "script-src 'self';" in policy
    assert policy.count("script-src") == 1
