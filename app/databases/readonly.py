"""Decide whether a SQL text may run against a database connector (docs/contract.md §7.2).

The check is an allow-list at the root (one read statement) and a deny-list over the
*whole* sqlglot tree (DML/DDL anywhere, locking, `SELECT … INTO`, side-effect
functions, hidden tables). Anything sqlglot cannot model (`exp.Command`, parse errors)
is refused. This is the first of three layers: the executor also runs the statement in
a read-only transaction with a server-side timeout, and the drivers are configured to
refuse multi-statement strings.
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

DIALECTS = {"postgresql": "postgres", "mysql": "mysql", "sqlite": "sqlite"}
"""Our dialect names → sqlglot dialect names."""

MAX_SQL_CHARS = 100_000
_CACHEABLE_CHARS = 4_000

_URL_SCHEMES = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "postgresql+asyncpg": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "mysql+aiomysql": "mysql",
    "mariadb+aiomysql": "mysql",
    "sqlite": "sqlite",
    "sqlite+aiosqlite": "sqlite",
}

_READ_ROOTS: tuple[type[exp.Expr], ...] = (
    exp.Select,
    exp.SetOperation,
    exp.Subquery,
    exp.Values,
)
_WRITE_ROOTS: tuple[type[exp.Expr], ...] = (exp.Insert, exp.Update, exp.Delete, exp.Merge)

# Node types refused anywhere in the tree, with the wording the model sees.
_FORBIDDEN_NODES: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Command, "statements the SQL parser cannot model are not allowed"),
    (exp.Insert, "data modification (INSERT) is not allowed"),
    (exp.Update, "data modification (UPDATE) is not allowed"),
    (exp.Delete, "data modification (DELETE) is not allowed"),
    (exp.Merge, "data modification (MERGE) is not allowed"),
    (exp.Copy, "COPY is not allowed"),
    (exp.DDL, "schema changes (DDL) are not allowed"),
    (exp.Drop, "schema changes (DROP) are not allowed"),
    (exp.Alter, "schema changes (ALTER) are not allowed"),
    (exp.TruncateTable, "TRUNCATE is not allowed"),
    (exp.Comment, "COMMENT ON is not allowed"),
    (exp.Grant, "GRANT is not allowed"),
    (exp.Revoke, "REVOKE is not allowed"),
    (exp.Into, "SELECT … INTO is not allowed"),
    (exp.Lock, "locking clauses (FOR UPDATE / FOR SHARE) are not allowed"),
    (exp.Set, "SET is not allowed"),
    (exp.SetItem, "SET is not allowed"),
    (exp.Transaction, "transaction control is not allowed"),
    (exp.Commit, "transaction control is not allowed"),
    (exp.Rollback, "transaction control is not allowed"),
    (exp.Pragma, "PRAGMA is not allowed"),
    (exp.Attach, "ATTACH is not allowed"),
    (exp.Detach, "DETACH is not allowed"),
    (exp.Use, "USE is not allowed"),
    (exp.LoadData, "LOAD DATA is not allowed"),
    (exp.Analyze, "ANALYZE is not allowed"),
    (exp.Kill, "KILL is not allowed"),
    (exp.Execute, "EXECUTE is not allowed"),
    (exp.Declare, "DECLARE is not allowed"),
    (exp.Cache, "CACHE is not allowed"),
    (exp.Uncache, "UNCACHE is not allowed"),
    (exp.Refresh, "REFRESH is not allowed"),
    (exp.Describe, "DESCRIBE is not allowed; use the discover subcommand"),
    (exp.Show, "SHOW is not allowed; use the list_tables/discover subcommands"),
    (exp.Export, "EXPORT is not allowed"),
    (exp.Install, "INSTALL is not allowed"),
    (exp.Placeholder, "bind parameters are not supported; inline the values"),
    (exp.Parameter, "bind parameters and variables are not supported; inline the values"),
    (exp.PropertyEQ, "variable assignment (:=) is not allowed"),
    (exp.Hint, "optimizer hints are not allowed"),
)

# Functions with side effects, file/network access, sleeps, or that run SQL from a string
# (which would bypass this validator and the hidden-table rule). Compared lower-case.
_FORBIDDEN_FUNCTIONS = frozenset(
    {
        # PostgreSQL
        "set_config", "nextval", "setval", "currval", "lastval",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
        "table_to_xml", "table_to_xmlschema", "table_to_xml_and_xmlschema",
        "cursor_to_xml", "cursor_to_xmlschema", "schema_to_xml", "schema_to_xmlschema",
        "schema_to_xml_and_xmlschema", "database_to_xml", "database_to_xmlschema",
        "database_to_xml_and_xmlschema", "ts_stat", "ts_rewrite",
        "loread", "lowrite", "txid_current", "txid_current_if_assigned",
        # MySQL / MariaDB
        "sleep", "benchmark", "load_file", "get_lock", "release_lock", "release_all_locks",
        "is_free_lock", "is_used_lock", "master_pos_wait", "source_pos_wait",
        "master_gtid_wait", "sys_exec", "sys_eval", "last_insert_id", "uuid_short",
        # SQLite
        "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",
    }
)  # fmt: skip
_FORBIDDEN_FUNCTION_PREFIXES = (
    "pg_sleep", "pg_read", "pg_ls_", "pg_stat_file", "pg_file", "pg_advisory",
    "pg_try_advisory", "pg_terminate", "pg_cancel", "pg_reload", "pg_rotate", "pg_switch",
    "pg_create", "pg_drop", "pg_replication", "pg_logical", "pg_promote", "pg_notify",
    "pg_backup", "pg_start_backup", "pg_stop_backup", "pg_wal", "pg_import", "pg_export",
    "pg_log", "pg_current_xact_id", "pg_current_snapshot", "pg_copy",
    "dblink", "lo_", "binary_upgrade", "pg_truncate", "pg_visibility", "pg_prewarm",
    "pragma_",
)  # fmt: skip

# Catalogs that expose *row values* (column statistics, large objects, credentials).
_FORBIDDEN_TABLES = frozenset(
    {
        "pg_stats", "pg_stats_ext", "pg_stats_ext_exprs", "pg_statistic",
        "pg_statistic_ext_data", "pg_largeobject", "pg_authid", "pg_shadow",
        "pg_user_mappings", "pg_user_mapping", "pg_hba_file_rules", "pg_ident_file_mappings",
        "pg_file_settings", "sqlite_stat4", "sqlite_stat3",
        # Other sessions' SQL text (which may carry literals and secrets).
        "pg_stat_activity", "pg_stat_statements", "pg_stat_statements_info", "processlist",
    }
)  # fmt: skip
_FORBIDDEN_SCHEMAS = {"mysql": frozenset({"mysql", "performance_schema", "sys"})}

_EXPLAIN_RE = {
    "postgresql": re.compile(
        r"\A\s*EXPLAIN(?:\s+VERBOSE)?(?:\s*\((?P<opts>[A-Za-z0-9_,\s]*)\))?\s+(?P<body>\S.*)\Z",
        re.IGNORECASE | re.DOTALL,
    ),
    "mysql": re.compile(
        r"\A\s*EXPLAIN(?:\s+(?:EXTENDED|PARTITIONS|FORMAT\s*=\s*(?:TRADITIONAL|JSON|TREE)))?"
        r"\s+(?P<body>\S.*)\Z",
        re.IGNORECASE | re.DOTALL,
    ),
    "sqlite": re.compile(
        r"\A\s*EXPLAIN(?:\s+QUERY\s+PLAN)?\s+(?P<body>\S.*)\Z", re.IGNORECASE | re.DOTALL
    ),
}
_ANALYZE_RE = re.compile(r"\AANALY[SZ]E\b", re.IGNORECASE)
_EXPLAIN_PREFIX_RE = re.compile(r"\A\s*EXPLAIN\b", re.IGNORECASE)
_PG_EXPLAIN_OPTIONS = frozenset(
    {"verbose", "costs", "settings", "format", "summary", "generic_plan", "wal", "timing"}
)
_PG_EXPLAIN_VALUES = frozenset({"on", "off", "true", "false", "1", "0", "text", "json", "yaml",
                                "xml"})  # fmt: skip
_ALLOWED_CONTROL = frozenset("\t\n\r")

logging.getLogger("sqlglot").setLevel(logging.ERROR)  # "falling back to Command" is our error


class SqlSafetyError(Exception):
    """The statement is refused before it reaches the database; the message says why."""


@dataclass(frozen=True, kw_only=True)
class CheckedSql:
    """A statement that passed validation."""

    sql: str
    """The text to execute (the original, minus surrounding whitespace and one trailing `;`)."""
    kind: str
    """`read`, `explain` or `write` (only when `read_only=False`)."""


def dialect_from_url(url: str) -> str:
    """Map a database URL to `postgresql` | `mysql` | `sqlite`; ValueError otherwise."""
    scheme, sep, rest = url.partition("://")
    dialect = _URL_SCHEMES.get(scheme.strip().lower()) if sep else None
    if dialect is None:
        raise ValueError(
            "unsupported database URL scheme; use postgresql://, mysql://, mariadb:// or "
            "sqlite:///path"
        )
    if dialect == "sqlite" and not rest.startswith("/"):
        raise ValueError("SQLite URLs look like sqlite:///relative/path or sqlite:////abs/path")
    return dialect


def validate_sql(
    sql: str,
    *,
    dialect: str,
    hidden_tables: Collection[str] = (),
    read_only: bool = True,
) -> None:
    """Raise SqlSafetyError unless `sql` is a single statement allowed by docs/contract.md §7.2."""
    check_sql(sql, dialect=dialect, hidden_tables=hidden_tables, read_only=read_only)


def check_sql(
    sql: str,
    *,
    dialect: str,
    hidden_tables: Collection[str] = (),
    read_only: bool = True,
    cache: bool = True,
) -> CheckedSql:
    """Validate and return the statement to execute (memoised for repeated statements)."""
    hidden = tuple(sorted({h.lower() for h in hidden_tables}))
    if cache and len(sql) <= _CACHEABLE_CHARS:
        return _check_cached(sql, dialect, hidden, read_only)
    return _check_uncached(sql, dialect, hidden, read_only)


def clear_validation_cache() -> None:
    """Forget memoised verdicts (benchmarks; rules never change at run time)."""
    _check_cached.cache_clear()


@functools.lru_cache(maxsize=1024)
def _check_cached(
    sql: str, dialect: str, hidden_tables: tuple[str, ...], read_only: bool
) -> CheckedSql:
    return _check_uncached(sql, dialect, hidden_tables, read_only)


def _check_uncached(
    sql: str, dialect: str, hidden_tables: tuple[str, ...], read_only: bool
) -> CheckedSql:
    if dialect not in DIALECTS:
        raise SqlSafetyError(f"unsupported dialect {dialect!r}")
    _check_text(sql, dialect)
    hidden = _HiddenTables(hidden_tables, _FORBIDDEN_SCHEMAS.get(dialect, frozenset()))
    explain = _EXPLAIN_RE[dialect].match(sql)
    if explain is not None:
        if _ANALYZE_RE.match(explain["body"]):
            raise SqlSafetyError("EXPLAIN ANALYZE is not allowed (it executes the statement)")
        _check_explain_options(explain.groupdict().get("opts"), dialect)
        _check_statement(explain["body"], dialect, hidden, read_only=True)
        return CheckedSql(sql=_strip(sql), kind="explain")
    if _EXPLAIN_PREFIX_RE.match(sql):
        raise SqlSafetyError("unsupported EXPLAIN form (EXPLAIN ANALYZE executes the statement)")
    kind = _check_statement(sql, dialect, hidden, read_only=read_only)
    return CheckedSql(sql=_strip(sql), kind=kind)


def _strip(sql: str) -> str:
    text = sql.strip()
    return text[:-1].rstrip() if text.endswith(";") else text


def _check_text(sql: str, dialect: str) -> None:
    if not sql.strip():
        raise SqlSafetyError("empty statement")
    if len(sql) > MAX_SQL_CHARS:
        raise SqlSafetyError(f"statement longer than {MAX_SQL_CHARS} characters")
    for ch in sql:
        if ch in _ALLOWED_CONTROL:
            continue
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            raise SqlSafetyError(f"control or invisible character U+{ord(ch):04X} is not allowed")
    if dialect == "mysql" and re.search(r"/\*M?!", sql):
        raise SqlSafetyError("MySQL executable comments (/*! … */) are not allowed")
    if dialect != "sqlite" and "/*+" in sql:
        # MySQL MAX_EXECUTION_TIME/SET_VAR and pg_hint_plan Set(...) would override limits.
        raise SqlSafetyError("optimizer hints (/*+ … */) are not allowed")
    if dialect == "postgresql" and re.search(r"U&\s*['\"]", sql, re.IGNORECASE):
        raise SqlSafetyError("Unicode-escape literals (U&'…') are not allowed")


def _check_explain_options(opts: str | None, dialect: str) -> None:
    if not opts or dialect != "postgresql":
        return
    for option in opts.split(","):
        words = option.lower().split()
        if not words:
            raise SqlSafetyError("empty EXPLAIN option")
        if words[0] in ("analyze", "analyse", "buffers"):
            raise SqlSafetyError("EXPLAIN ANALYZE is not allowed (it executes the statement)")
        if words[0] not in _PG_EXPLAIN_OPTIONS or len(words) > 2:
            raise SqlSafetyError(f"EXPLAIN option {option.strip()!r} is not allowed")
        if len(words) == 2 and words[1] not in _PG_EXPLAIN_VALUES:
            raise SqlSafetyError(f"EXPLAIN option {option.strip()!r} is not allowed")


def _parse_one(sql: str, dialect: str) -> exp.Expr:
    try:
        statements = sqlglot.parse(sql, read=DIALECTS[dialect])
    except (ParseError, TokenError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SqlSafetyError(f"could not parse the statement ({dialect}): {reason}") from None
    real = [s for s in statements if s is not None and not isinstance(s, exp.Semicolon)]
    if len(real) != 1 or len(statements) > 2 or (len(statements) == 2 and statements[1]):
        count = max(len(real), len(statements))
        raise SqlSafetyError(f"exactly one statement is allowed (found {count})")
    return real[0]


def _check_statement(sql: str, dialect: str, hidden: _HiddenTables, *, read_only: bool) -> str:
    root = _parse_one(sql, dialect)
    allowed = _READ_ROOTS if read_only else _READ_ROOTS + _WRITE_ROOTS
    if not isinstance(root, allowed):
        what = "read statements (SELECT, set operations, CTEs, EXPLAIN)"
        if not read_only:
            what = "SELECT, INSERT, UPDATE, DELETE or MERGE"
        raise SqlSafetyError(f"only {what} are allowed; got {_describe(root)}")
    for node in root.walk():
        if node is root and not read_only and isinstance(root, _WRITE_ROOTS):
            continue
        _check_node(node, hidden)
    return "write" if isinstance(root, _WRITE_ROOTS) else "read"


_REASONS_BY_CLASS: dict[type, str | None] = {}


def _forbidden_reason(cls: type) -> str | None:
    """Why a node class is refused (memoised per class: one dict hit per node)."""
    if cls not in _REASONS_BY_CLASS:
        _REASONS_BY_CLASS[cls] = next(
            (reason for kind, reason in _FORBIDDEN_NODES if issubclass(cls, kind)), None
        )
    return _REASONS_BY_CLASS[cls]


def _check_node(node: exp.Expr, hidden: _HiddenTables) -> None:
    reason = _forbidden_reason(type(node))
    if reason is not None:
        raise SqlSafetyError(reason)
    if isinstance(node, exp.Func):
        for name in _function_names(node):
            if name in _FORBIDDEN_FUNCTIONS or name.startswith(_FORBIDDEN_FUNCTION_PREFIXES):
                raise SqlSafetyError(f"function {name!r} is not allowed")
    elif isinstance(node, exp.Table):
        _check_table(node, hidden)


def _function_names(node: exp.Func) -> Iterator[str]:
    if isinstance(node, exp.Anonymous):
        yield str(node.name).lower()
    else:
        yield from (n.lower() for n in type(node).sql_names())
        yield type(node).__name__.lower()


def _check_table(node: exp.Table, hidden: _HiddenTables) -> None:
    name = node.name.lower()
    schema = node.db.lower() if node.db else ""
    if name in _FORBIDDEN_TABLES or schema in hidden.forbidden_schemas:
        qualified = f"{schema}.{name}" if schema else name
        raise SqlSafetyError(f"system table {qualified!r} is not allowed")
    if name and hidden.matches(schema, name):
        raise SqlSafetyError(f"table {node.name!r} is not available")


def _describe(root: exp.Expr) -> str:
    if isinstance(root, exp.Command):
        return str(root.this).upper() or "an unparseable statement"
    return root.key.upper()


class _HiddenTables:
    """Hidden names, matched case-insensitively; `schema.table` or a bare `table`."""

    def __init__(self, names: Collection[str], forbidden_schemas: frozenset[str]) -> None:
        self.forbidden_schemas = forbidden_schemas
        self._bare: set[str] = set()
        self._qualified: set[tuple[str, str]] = set()
        for raw in names:
            schema, dot, table = raw.lower().rpartition(".")
            if dot:
                self._qualified.add((schema, table))
            else:
                self._bare.add(table)
        self._qualified_names = {t for _, t in self._qualified}

    def matches(self, schema: str, table: str) -> bool:
        if table in self._bare:
            return True
        if table not in self._qualified_names:
            return False
        # An unqualified reference may resolve to a hidden schema-qualified table.
        return not schema or (schema, table) in self._qualified
