from __future__ import annotations

import re

import pytest

from app.tools.names import NameAllocator, sanitize_tool_name

VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("jira__create_issue", "jira__create_issue"),
        ("github__search.code", "github__search_code"),
        ("srv__get file (v2)", "srv__get_file_v2_"),
        ("db__Liste des tâches", "db__Liste_des_t_ches"),
        ("", "tool"),
        ("a" * 80, "a" * 64),
    ],
)
def test_sanitize(raw: str, expected: str) -> None:
    assert sanitize_tool_name(raw) == expected
    assert VALID.fullmatch(expected)


def test_collisions_get_numbered_suffixes() -> None:
    names = NameAllocator(reserved={"http_fetch"})
    assert names.allocate("a__b.c") == "a__b_c"
    assert names.allocate("a__b c") == "a__b_c_2"
    assert names.allocate("a__b/c") == "a__b_c_3"
    assert names.allocate("http_fetch") == "http_fetch_2"


def test_collision_suffix_keeps_the_length_limit() -> None:
    names = NameAllocator()
    first = names.allocate("x" * 70)
    second = names.allocate("x" * 65)
    assert first == "x" * 64
    assert second == "x" * 62 + "_2"
    assert VALID.fullmatch(second)
