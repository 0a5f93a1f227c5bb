"""`redact_text` skips a pattern only when the text cannot match it: the result is always the
one the patterns give when applied to every text (the reference below)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.security import redact
from app.security.redact import MASK, redact_text


def _reference(text: str) -> str:
    """Every pattern, applied without looking first."""
    if not text:
        return text
    for pattern in redact._patterns():
        text = pattern.sub(MASK, text)
    text = redact._URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    return redact._BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)


_PIECES = st.sampled_from(
    [
        "bearer", "Bearer", "BASIC", "basic", "ba\u017fic", "BA\u017fIC", "bas\u0131c",
        "bas\u0130c", "bas\u0307ic",
        "https://", "://", "@", ":", "/", " ", "\t", "\n", "user", "pw", "token1234567",
        "dXNlcjpwYXNzd29yZA==", "\u0130", "\u0131", "\u017f", "é", "{", '"',
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES | st.text(max_size=6), max_size=24).map("".join))
def test_redact_text_equals_every_pattern_applied(text: str) -> None:
    assert redact_text(text) == _reference(text)


def test_case_folded_scheme_names_are_still_masked() -> None:
    # `(?i)` matches U+017F for s, U+0131 and U+0130 for i: the scheme spelt so is masked.
    for word in ("ba\u017fic", "bas\u0131c", "bas\u0130c", "BEARER"):
        line = f"Authorization: {word} dXNlcjpwYXNzd29yZA=="
        assert redact_text(line) == f"Authorization: {word} {MASK}", word


def test_url_password_is_masked_with_the_check_in_front() -> None:
    assert redact_text("dsn postgresql://bob:hunter2@db/x") == f"dsn postgresql://bob:{MASK}@db/x"
