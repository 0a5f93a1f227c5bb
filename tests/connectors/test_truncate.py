"""`truncate_for_model`: JSON-aware cuts with hints the model can act on."""

from __future__ import annotations

import json

from app.tools.truncate import truncate_for_model


def test_short_text_is_untouched() -> None:
    assert truncate_for_model('{"a": 1}') == '{"a": 1}'
    assert truncate_for_model("plain words") == "plain words"


def test_long_json_list_keeps_first_items_and_names_the_keys() -> None:
    items = [{"id": i, "title": f"t{i}", **({"extra": 1} if i == 3 else {})} for i in range(57)]
    out = truncate_for_model(json.dumps(items))
    hint, _, body = out.partition("\n")
    assert hint == "[showing 10/57 items, keys: id, title, extra]"
    assert json.loads(body) == items[:10]


def test_envelope_lists_are_cut_one_level_down() -> None:
    payload = {"total": 40, "data": list(range(40)), "meta": {"page": 1}}
    out = truncate_for_model(json.dumps(payload), max_items=5)
    lines = out.splitlines()
    assert lines[:2] == ["[data: showing 5/40 items]", "[keys: total, data, meta]"]
    assert json.loads(lines[2]) == {"total": 40, "data": [0, 1, 2, 3, 4], "meta": {"page": 1}}


def test_long_text_is_cut_with_the_total_length() -> None:
    out = truncate_for_model("é" * 9000, max_chars=100)
    assert out == "é" * 100 + "\n[Truncated: 9000 chars total]"


def test_still_too_long_json_gets_both_hints() -> None:
    items = [{"blob": "x" * 2000} for _ in range(30)]
    out = truncate_for_model(json.dumps(items), max_chars=3000)
    assert out.startswith("[showing 10/30 items, keys: blob]\n[\n{")
    assert out.endswith("chars total]")
    assert len(out) < 3100


def test_invalid_json_is_treated_as_text() -> None:
    assert truncate_for_model("[1, 2", max_items=1) == "[1, 2"
