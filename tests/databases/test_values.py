from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest

from app.databases.query import QueryResult, render_for_model
from app.databases.values import clean_driver_message, json_rows, json_value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal("12.50"), 12.5),
        (Decimal("100"), 100),
        (Decimal("12345678901234567890.0123456789"), "12345678901234567890.0123456789"),
        (Decimal("NaN"), "NaN"),
        (float("inf"), "inf"),
        (dt.date(2024, 5, 1), "2024-05-01"),
        (dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC), "2024-05-01T10:00:00+00:00"),
        (dt.time(23, 59), "23:59:00"),
        (dt.timedelta(hours=1, seconds=1), 3601.0),
        (b"\x00\xff", "\\x00ff"),
        (memoryview(b"ab"), "\\x6162"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        ({"a": [Decimal("1.5"), None]}, {"a": [1.5, None]}),
        ({"b", "a"}, ["a", "b"]),
        (object, str(object)),
    ],
)
def test_values_become_json_safe(value: object, expected: object) -> None:
    assert json_value(value) == expected
    json.dumps(json_value(value), allow_nan=False)


def test_json_rows_keeps_plain_values_untouched() -> None:
    assert json_rows([(1, "a", None, True), (2, "b", Decimal("1.25"), False)]) == [
        [1, "a", None, True],
        [2, "b", 1.25, False],
    ]


def test_driver_messages_lose_urls_and_passwords() -> None:
    url = "postgresql://app:p%40ss-Very$ecret@db.internal:5432/shop"
    exc = RuntimeError(
        f"could not connect to {url}: password=p@ss-Very$ecret rejected for p%40ss-Very$ecret"
    )
    message = clean_driver_message(exc, url)
    assert "Very$ecret" not in message
    assert "db.internal" not in message
    assert "could not connect" in message


def test_pymysql_style_errors_show_the_error_number() -> None:
    exc = RuntimeError(1146, "Table 'shop.nope' doesn't exist")
    assert clean_driver_message(exc, "mysql://root@h/shop") == (
        "(1146) Table 'shop.nope' doesn't exist"
    )


def _result(rows: list[list[object]]) -> QueryResult:
    return QueryResult(columns=["n", "text"], rows=rows, row_count=len(rows), truncated=False,
                       elapsed_ms=1.0)  # fmt: skip


def test_model_output_is_compact_json_when_small() -> None:
    text = render_for_model(_result([[1, "a"]]))
    assert json.loads(text)["rows"] == [[1, "a"]]
    assert text.startswith('{"columns":["n","text"]')


def test_model_output_drops_rows_with_a_hint_when_huge() -> None:
    rows: list[list[object]] = [[i, "x" * 200] for i in range(1000)]
    text = render_for_model(_result(rows), max_chars=8000)
    body = json.loads(text)
    assert len(text) <= 8000
    assert body["truncated"] is True
    assert 0 < len(body["rows"]) < 1000
    assert body["note"].startswith(f"showing {len(body['rows'])}/1000 rows")
    assert body["row_count"] == 1000


def test_model_output_clips_giant_cells() -> None:
    body = json.loads(render_for_model(_result([[1, "y" * 50_000]])))
    cell = body["rows"][0][1]
    assert len(cell) < 1100
    assert cell.endswith("[+49000 chars]")


def test_json_rows_checks_float_columns_for_nan_and_infinity() -> None:
    rows = [(1.5, 1.0, None), (float("nan"), None, 2.0), (2.5, float("-inf"), 3)]
    assert json_rows(rows) == [[1.5, 1.0, None], ["nan", None, 2.0], [2.5, "-inf", 3]]
    json.dumps(json_rows(rows), allow_nan=False)


def test_json_rows_handles_mixed_type_columns() -> None:
    rows = [("a", 1e308), (b"\x01", 1e308), (Decimal("2.5"), 1)]
    assert json_rows(rows) == [["a", 1e308], ["\\x01", 1e308], [2.5, 1]]
    assert json_rows([]) == []


def test_model_output_explains_a_row_cap() -> None:
    capped = QueryResult(columns=["n"], rows=[[1], [2]], row_count=2, truncated=True,
                         elapsed_ms=1.0)  # fmt: skip
    body = json.loads(render_for_model(capped))
    assert body["truncated"] is True
    assert body["note"].startswith("stopped at 2 rows")


def test_typed_columns_are_checked_by_their_first_value_but_floats_fully() -> None:
    rows = [(1, 0.5, None), (2, float("nan"), 1.5), (3, 2.0, float("inf"))]
    assert json_rows(rows, typed=True) == [[1, 0.5, None], [2, "nan", 1.5], [3, 2.0, "inf"]]
    decimals = [(Decimal("1.5"),), (None,)]
    assert json_rows(decimals, typed=True) == [[1.5], [None]]
