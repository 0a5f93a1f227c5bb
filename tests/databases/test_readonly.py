from __future__ import annotations

import pytest

from app.databases.readonly import SqlSafetyError, check_sql, dialect_from_url, validate_sql
from tests.databases.cases import ADVERSARIAL, LEGITIMATE, Case, params

HIDDEN = ["secrets"]


@pytest.mark.parametrize(("dialect", "case"), params(ADVERSARIAL))
def test_adversarial_statement_is_refused(dialect: str, case: Case) -> None:
    with pytest.raises(SqlSafetyError) as refused:
        validate_sql(case.sql, dialect=dialect, hidden_tables=HIDDEN)
    if case.reason:
        assert case.reason in str(refused.value)


@pytest.mark.parametrize(("dialect", "case"), params(LEGITIMATE))
def test_legitimate_query_passes_validation(dialect: str, case: Case) -> None:
    validate_sql(case.sql, dialect=dialect, hidden_tables=HIDDEN)


def test_corpus_has_sixty_plus_unique_statements_per_live_dialect() -> None:
    ids = [c.id for c in ADVERSARIAL]
    assert len(ids) == len(set(ids))
    for dialect in ("postgresql", "mysql", "sqlite"):
        assert sum(dialect in c.dialects for c in ADVERSARIAL) >= 60, dialect


@pytest.mark.parametrize(
    ("url", "dialect"),
    [
        ("postgresql://u:p@h:5432/db", "postgresql"),
        ("postgres://u@h/db", "postgresql"),
        ("postgresql+asyncpg://u@h/db", "postgresql"),
        ("mysql://root@127.0.0.1:3306/db", "mysql"),
        ("mariadb://root@127.0.0.1/db", "mysql"),
        ("mysql+aiomysql://root@127.0.0.1/db", "mysql"),
        ("sqlite:///relative.db", "sqlite"),
        ("sqlite:////abs/path.db", "sqlite"),
    ],
)
def test_dialect_from_url_accepts_supported_schemes(url: str, dialect: str) -> None:
    assert dialect_from_url(url) == dialect


@pytest.mark.parametrize(
    "url", ["oracle://u@h/db", "mssql+pyodbc://h", "not a url", "sqlite:relative.db", "http://x"]
)
def test_dialect_from_url_rejects_other_schemes(url: str) -> None:
    with pytest.raises(ValueError, match="sqlite"):
        dialect_from_url(url)


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(SqlSafetyError, match="unsupported dialect"):
        validate_sql("SELECT 1", dialect="oracle")


def test_trailing_semicolon_and_whitespace_are_stripped_from_the_executed_text() -> None:
    checked = check_sql("  SELECT 1 ;  \n", dialect="postgresql")
    assert (checked.sql, checked.kind) == ("SELECT 1", "read")


def test_explain_without_analyze_is_a_read() -> None:
    checked = check_sql("EXPLAIN (COSTS off, FORMAT json) SELECT 1", dialect="postgresql")
    assert checked.kind == "explain"


@pytest.mark.parametrize(
    "sql",
    ["EXPLAIN (TIMING on, SERIALIZE) SELECT 1", "EXPLAIN (FORMAT json; DROP) SELECT 1",
     "EXPLAIN (BUFFERS) SELECT 1", "EXPLAIN (COSTS maybe) SELECT 1"],
)  # fmt: skip
def test_explain_options_outside_the_allow_list_are_refused(sql: str) -> None:
    with pytest.raises(SqlSafetyError):
        validate_sql(sql, dialect="postgresql")


def test_write_mode_allows_exactly_one_data_statement() -> None:
    checked = check_sql("DELETE FROM orders WHERE id = 1", dialect="postgresql", read_only=False)
    assert checked.kind == "write"
    with pytest.raises(SqlSafetyError, match="exactly one statement"):
        validate_sql("DELETE FROM orders; DELETE FROM customers", dialect="postgresql",
                     read_only=False)  # fmt: skip


@pytest.mark.parametrize(
    "sql",
    ["DROP TABLE orders", "SELECT pg_sleep(5)", "INSERT INTO orders SELECT * FROM secrets",
     "UPDATE orders SET amount = (SELECT 1 FROM secrets)", "SET statement_timeout = 0",
     "COPY orders TO PROGRAM 'id'", "SELECT 1; DELETE FROM orders"],
)  # fmt: skip
def test_write_mode_still_refuses_ddl_side_effects_hidden_tables_and_stacking(sql: str) -> None:
    with pytest.raises(SqlSafetyError):
        validate_sql(sql, dialect="postgresql", hidden_tables=HIDDEN, read_only=False)


def test_schema_qualified_hidden_table_matches_qualified_and_bare_references() -> None:
    hidden = ["audit.events"]
    for sql in ("SELECT * FROM audit.events", "SELECT * FROM events", "SELECT * FROM AUDIT.EVENTS"):
        with pytest.raises(SqlSafetyError, match="not available"):
            validate_sql(sql, dialect="postgresql", hidden_tables=hidden)
    validate_sql("SELECT * FROM public.events", dialect="postgresql", hidden_tables=hidden)


def test_refusal_names_the_forbidden_function() -> None:
    with pytest.raises(SqlSafetyError, match=r"function 'pg_read_file' is not allowed"):
        validate_sql("SELECT length(pg_read_file('/etc/passwd'))", dialect="postgresql")


def test_non_hidden_tables_with_similar_names_pass() -> None:
    validate_sql("SELECT * FROM secrets_archive", dialect="postgresql", hidden_tables=HIDDEN)


def test_mysql_system_schema_rule_does_not_apply_to_postgres_schemas_named_sys() -> None:
    validate_sql("SELECT * FROM sys.metrics", dialect="postgresql")
    with pytest.raises(SqlSafetyError, match="system table"):
        validate_sql("SELECT * FROM sys.metrics", dialect="mysql")


def test_overlong_statement_is_refused() -> None:
    sql = "SELECT " + ", ".join(["1"] * 60_000)
    with pytest.raises(SqlSafetyError, match="longer than"):
        validate_sql(sql, dialect="sqlite")
