"""The executor trusts arguments the pipeline checked and checks any others itself."""

from __future__ import annotations

import json

from app.connectors.execute import ConnectorExecutor
from app.tools.base import CallContext
from app.tools.validation import CheckedArguments
from tests.connectors.conftest import make_action, make_connector
from tests.connectors.server_app import LocalServer

CTX = CallContext(run_id="run-1")
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}


async def test_checked_arguments_are_sent_as_they_are(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    action = make_action(parameters=SCHEMA)
    checked = CheckedArguments({"id": "7", "extra": "x"})  # the pipeline's word is trusted
    result = await executor.execute(make_connector(server.url), action, checked, CTX)
    assert result.ok, result.error
    assert json.loads(result.output.partition("\n")[2])["query"] == [["id", "7"], ["extra", "x"]]
    assert result.step == "connector:svc/act"


async def test_unchecked_arguments_are_checked_by_the_executor(
    executor: ConnectorExecutor, server: LocalServer
) -> None:
    action = make_action(parameters=SCHEMA)
    before = len(server.log)
    result = await executor.execute(make_connector(server.url), action, {"id": "7", "ide": 1}, CTX)
    assert result.error == (
        "Invalid parameters for 'act': ide: unknown parameter (did you mean 'id'?); valid: id"
    )
    assert len(server.log) == before  # nothing was sent
