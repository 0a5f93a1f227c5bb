"""Which calls wait because of the agent's approval globs (discover/list never do)."""

from __future__ import annotations

from app.agents.config import Approval
from app.approvals.policy import glob_reason

RULES = Approval(tools=["database:*", "connector:*/delete_*", "mcp:github/create_pr", "http_*"])


def test_acting_calls_matching_a_glob_wait() -> None:
    query = {"subcommand": "query", "database": "sales", "sql": "SELECT 1"}
    assert glob_reason(RULES, "database", "database", query, "database:sales/query")
    assert glob_reason(RULES, "sales__query", "database", {}, "database:sales/query")
    delete = {"subcommand": "execute", "connector": "jira", "action": "delete_issue"}
    assert glob_reason(RULES, "connector", "connector", delete, "connector:jira/delete_issue")
    pr = {"subcommand": "call", "server": "github", "tool": "create_pr"}
    assert glob_reason(RULES, "mcp", "mcp", pr, "mcp:github/create_pr")
    assert glob_reason(RULES, "http_fetch", "builtin", {"url": "x"}, "http_fetch")


def test_discover_list_and_request_tools_never_wait() -> None:
    everything = Approval(tools=["*"])
    looks = [
        ("database", "database", {"subcommand": "list_tables"}, "database:sales/list_tables"),
        ("database", "database", {"subcommand": "discover"}, "database:sales/discover"),
        ("sales__list_tables", "database", {}, "database:sales/list_tables"),
        ("sales__describe_table", "database", {}, "database:sales/describe_table"),
        ("connector", "connector", {"subcommand": "discover"}, "connector:jira"),
        ("mcp", "mcp", {"subcommand": "discover"}, "mcp:github"),
        ("request_tools", "meta", {"names": ["x"]}, "request_tools"),
    ]
    for name, kind, args, step in looks:
        assert glob_reason(everything, name, kind, args, step) is None, name


def test_no_rules_or_no_match_means_no_wait() -> None:
    create = {"subcommand": "execute", "connector": "jira", "action": "create_issue"}
    assert (
        glob_reason(None, "connector", "connector", create, "connector:jira/create_issue") is None
    )
    assert (
        glob_reason(RULES, "connector", "connector", create, "connector:jira/create_issue") is None
    )
    assert glob_reason(RULES, "mcp", "mcp", {"subcommand": "call"}, "mcp:GitHub/create_pr") is None
