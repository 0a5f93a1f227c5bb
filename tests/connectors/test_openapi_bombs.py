"""Hostile OpenAPI documents: a `$ref` bomb, a YAML alias bomb and deep nesting are refused
with a 422 by a node budget, off the event loop (the server keeps answering)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import time
from typing import Any

import httpx
import pytest

from app.connectors import openapi_doc
from app.connectors.openapi import parse_openapi
from app.errors import Invalid
from tests.fixtures.crud import check_rejected

IMPORT = "/api/v1/connectors/import"
PATH = "/api/v1/connectors"


def ref_bomb(width: int = 9, depth: int = 8) -> dict[str, Any]:
    """~3.7 KB of JSON whose request body expands to width**depth (43 million) nodes."""
    schemas: dict[str, Any] = {
        f"L{level}": {
            "type": "object",
            "properties": {
                f"p{i}": {"$ref": f"#/components/schemas/L{level + 1}"} for i in range(width)
            },
        }
        for level in range(depth)
    }
    schemas[f"L{depth}"] = {"type": "string"}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "bomb"},
        "servers": [{"url": "https://bomb.test"}],
        "paths": {"/x": {"post": {"requestBody": body}}},
        "components": {"schemas": schemas},
    }


def yaml_bomb(width: int = 9, depth: int = 9) -> str:
    """A billion-laughs document: 9 aliases per level, 9 levels (387 million strings)."""
    lines = [
        "openapi: 3.0.3",
        "info: {title: bomb}",
        "servers: [{url: 'https://bomb.test'}]",
        "x-lol:",
        "  a0: &a0 [" + ", ".join(["lol"] * width) + "]",
    ]
    lines += [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, depth)]
    lines += [
        "paths:",
        "  /x:",
        "    post:",
        "      requestBody:",
        "        content:",
        "          application/json:",
        f"            schema: {{type: object, properties: {{laughs: {{enum: *a{depth - 1}}}}}}}",
    ]
    return "\n".join(lines) + "\n"


def test_a_ref_bomb_is_refused_by_the_node_budget() -> None:
    assert len(json.dumps(ref_bomb())) < 4000
    with pytest.raises(Invalid) as caught:
        parse_openapi(ref_bomb())
    assert caught.value.message == (
        "/paths/~1x/post/requestBody/content/application~1json/schema: schemas expand to "
        "more than 100000 nodes ($ref bomb?); refused"
    )
    # the same shape, small enough, imports: the budget is about size, not about $refs
    (action,) = parse_openapi(ref_bomb(width=3, depth=4)).actions
    assert set(action.parameters["properties"]) == {"p0", "p1", "p2"}


def test_a_yaml_alias_bomb_is_refused_before_it_expands() -> None:
    with pytest.raises(Invalid) as caught:
        parse_openapi(yaml_bomb())
    assert caught.value.message == (
        "/: the document expands to more than 5000000 nodes (YAML aliases?); refused"
    )
    (action,) = parse_openapi(yaml_bomb(width=3, depth=3)).actions  # 27 laughs are fine
    assert len(action.parameters["properties"]["laughs"]["enum"]) == 3


@pytest.mark.parametrize(
    "document",
    [
        '{"openapi": "3.0.3", "x": ' + "[" * 5000 + "]" * 5000 + "}",
        "openapi: 3.0.3\nx: " + "[" * 5000 + "]" * 5000 + "\n",
        "openapi: 3.0.3\nx: " + "[" * 200 + "]" * 200 + "\n",
    ],
    ids=["json", "yaml", "yaml-200"],
)
def test_deep_nesting_is_a_clear_refusal(document: str) -> None:
    with pytest.raises(Invalid, match=r"^/: nested deeper than 128 levels$"):
        parse_openapi(document)


def test_deeply_nested_schemas_are_refused() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        schema = {"type": "array", "items": schema}
    doc = ref_bomb()
    doc["paths"]["/x"]["post"]["requestBody"]["content"]["application/json"]["schema"] = schema
    with pytest.raises(Invalid, match=r"schema nested deeper than 128 levels$"):
        parse_openapi(doc)


async def test_bombs_are_422_and_write_nothing(client: httpx.AsyncClient) -> None:
    for document in (ref_bomb(), yaml_bomb()):
        await check_rejected(
            client, IMPORT, {"document": document}, mentions=["nodes", "refused"], list_path=PATH
        )


async def test_healthz_answers_while_a_bomb_is_being_refused(client: httpx.AsyncClient) -> None:
    """The conversion runs in a worker thread: the event loop keeps serving meanwhile. On the
    loop, refusing three bombs in a row (~0.1 s of CPU each) would leave long silences without
    any answer. (The app's first request is not cold: the lifespan builds the routes.)

    Like `quiver serve` (`create_app(freeze_gc=True)`), what is alive before the measurement is
    frozen out of the cyclic collector's reach: late in the suite, this process holds every
    earlier test's leftovers, and one full collection of them stopped every thread for seconds
    (CI saw 3.9 and 6.8 s silences), which is pytest's heap, not the server's behaviour."""
    gc.collect()
    gc.freeze()
    try:
        await _healthz_while_bombs_are_refused(client)
    finally:
        gc.unfreeze()


async def _healthz_while_bombs_are_refused(client: httpx.AsyncClient) -> None:
    started = time.perf_counter()
    finished: list[float] = []

    async def post_bomb() -> httpx.Response:
        try:
            for _ in range(2):
                refused = await client.post(IMPORT, json={"document": ref_bomb()})
                assert refused.status_code == 422, refused.text
            return await client.post(IMPORT, json={"document": ref_bomb()})
        finally:  # in the task itself: a done callback may not have run when `done()` is true
            finished.append(time.perf_counter())

    bomb = asyncio.create_task(post_bomb())
    answers: list[float] = []
    while not bomb.done():
        health = await client.get("/healthz")
        assert health.status_code == 200
        if not bomb.done():
            answers.append(time.perf_counter())
        await asyncio.sleep(0.005)
    refused = bomb.result()
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "Invalid"
    importing = finished[0] - started
    moments = [started, *answers, finished[0]]
    silence = max(b - a for a, b in itertools.pairwise(moments))
    summary = f"{len(answers)} /healthz in {importing:.2f}s, longest silence {silence:.2f}s"
    assert len(answers) >= 8, summary
    assert silence < importing / 2, summary


def test_one_big_schema_shared_by_many_operations_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each operation stays under its own budget; together they would expand to 20M nodes.
    (The total budget is lowered from 2M to 200k to keep the test quick.)"""
    monkeypatch.setattr(openapi_doc, "MAX_TOTAL_NODES", 200_000)
    doc = ref_bomb(width=9, depth=4)  # ~26k nodes per use
    body = doc["paths"].pop("/x")["post"]
    doc["paths"] = {f"/x{i}": {"post": body} for i in range(800)}
    with pytest.raises(Invalid) as caught:
        parse_openapi(doc)
    assert caught.value.message == (
        "/paths/~1x8/post/requestBody/content/application~1json/schema: the operations' "
        "schemas expand to more than 200000 nodes in all ($ref bomb?); refused"
    )
