"""Parameter serialization against the OpenAPI specification's style table (3.1, "Style
Examples": `color` as the string "blue", the array ["blue","black","brown"] and the object
{"R":100,"G":200,"B":150})."""

from __future__ import annotations

from typing import Any

import pytest

from app.connectors.actions import action_parameters_schema, build_request_parts
from app.connectors.params import SerializationError, Style, header_value, path_value, query_pairs
from tests.connectors.conftest import make_action

ARRAY = ["blue", "black", "brown"]
OBJECT = {"R": 100, "G": 200, "B": 150}


def style(kind: str, explode: bool, **kw: Any) -> Style:
    return Style(style=kind, explode=explode, **kw)


@pytest.mark.parametrize(
    ("kind", "explode", "value", "expected"),
    [
        ("simple", False, "blue", "blue"),
        ("simple", False, ARRAY, "blue,black,brown"),
        ("simple", True, ARRAY, "blue,black,brown"),
        ("simple", False, OBJECT, "R,100,G,200,B,150"),
        ("simple", True, OBJECT, "R=100,G=200,B=150"),
        ("label", False, "blue", ".blue"),
        ("label", False, ARRAY, ".blue,black,brown"),
        ("label", True, ARRAY, ".blue.black.brown"),
        ("label", False, OBJECT, ".R,100,G,200,B,150"),
        ("label", True, OBJECT, ".R=100.G=200.B=150"),
        ("matrix", False, "blue", ";color=blue"),
        ("matrix", False, ARRAY, ";color=blue,black,brown"),
        ("matrix", True, ARRAY, ";color=blue;color=black;color=brown"),
        ("matrix", False, OBJECT, ";color=R,100,G,200,B,150"),
        ("matrix", True, OBJECT, ";R=100;G=200;B=150"),
    ],
)
def test_path_styles(kind: str, explode: bool, value: Any, expected: str) -> None:
    assert path_value("color", value, style(kind, explode)) == expected


@pytest.mark.parametrize(
    ("kind", "explode", "value", "expected"),
    [
        ("form", True, "blue", ["color=blue"]),
        ("form", False, ARRAY, ["color=blue,black,brown"]),
        ("form", True, ARRAY, ["color=blue", "color=black", "color=brown"]),
        ("form", False, OBJECT, ["color=R,100,G,200,B,150"]),
        ("form", True, OBJECT, ["R=100", "G=200", "B=150"]),
        ("spaceDelimited", False, ARRAY, ["color=blue%20black%20brown"]),
        ("spaceDelimited", False, OBJECT, ["color=R%20100%20G%20200%20B%20150"]),
        ("pipeDelimited", False, ARRAY, ["color=blue|black|brown"]),
        ("pipeDelimited", False, OBJECT, ["color=R|100|G|200|B|150"]),
        ("deepObject", True, OBJECT, ["color[R]=100", "color[G]=200", "color[B]=150"]),
        ("deepObject", True, "blue", ["color=blue"]),
    ],
)
def test_query_styles(kind: str, explode: bool, value: Any, expected: list[str]) -> None:
    assert query_pairs("color", value, style(kind, explode)) == expected


def test_query_values_are_percent_encoded_unless_reserved_is_allowed() -> None:
    assert query_pairs("q", "a b&c=d/é", style("form", True)) == ["q=a%20b%26c%3Dd%2F%C3%A9"]
    reserved = style("form", True, allow_reserved=True)
    assert query_pairs("q", "a/b?c:d&e", reserved) == ["q=a/b?c:d%26e"]
    assert query_pairs("filter", {"a": [1, 2], "b": {"c": True}}, style("deepObject", True)) == [
        "filter[a][0]=1",
        "filter[a][1]=2",
        "filter[b][c]=true",
    ]


def test_headers_are_simple_and_refuse_line_breaks() -> None:
    assert header_value("X-Ids", [1, 2, 3], style("simple", False)) == "1,2,3"
    assert header_value("X-Obj", OBJECT, style("simple", True)) == "R=100,G=200,B=150"
    with pytest.raises(SerializationError, match="must not contain line breaks"):
        header_value("X-Evil", "a\r\nX-Other: 1", style("simple", False))


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a\\b"])
def test_a_single_segment_refuses_slashes_and_dot_segments(bad: str) -> None:
    with pytest.raises(SerializationError, match="must be a non-empty segment"):
        path_value("id", bad, style("simple", False))


def test_a_single_segment_keeps_dots_inside_a_value() -> None:
    assert path_value("basehead", "main...topic", style("simple", False)) == "main...topic"


@pytest.mark.parametrize("bad", ["../x", "a/../b", "a/./b", "a//b", "/a", "a/", "a\\b", ".."])
def test_multi_segment_values_refuse_traversal(bad: str) -> None:
    with pytest.raises(SerializationError, match="non-empty path of segments"):
        path_value("path", bad, style("simple", False, multi_segment=True))


def test_multi_segment_values_encode_each_segment() -> None:
    multi = style("simple", False, multi_segment=True)
    assert path_value("path", "docs/a b/é?.md", multi) == "docs/a%20b/%C3%A9%3F.md"


def test_an_action_places_styled_values_and_the_model_never_sees_the_hints() -> None:
    params = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "x-location": "path", "x-multi-segment": True},
            "ids": {"type": "array", "x-location": "query", "x-explode": False},
            "f": {"type": "object", "x-location": "query", "x-style": "deepObject"},
            "meta": {"type": "object", "x-location": "query", "x-style": "json"},
        },
    }
    action = make_action(path="/files/{path}", parameters=params)
    parts = build_request_parts(
        action, {"path": "a/b.txt", "ids": [1, 2], "f": {"x": 1}, "meta": {"k": "v"}}
    )
    assert parts.path == "/files/a/b.txt"
    assert parts.query == ["ids=1,2", "f[x]=1", "meta=%7B%22k%22%3A%22v%22%7D"]
    seen = action_parameters_schema(action)
    assert all(k.startswith("x-") is False for p in seen["properties"].values() for k in p)
