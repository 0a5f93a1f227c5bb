"""Which committed writes make in-process caches stale, and the version those caches check.

Caches of stored configuration (agents with their links, API keys) keep what they loaded with
the process's `version()`. Any committed transaction that wrote a watched table moves the
version on: here at once (`after_commit`), and in every other worker through the `announcer`
(on Postgres the run hub sends `NOTIFY` in the writing transaction, and each worker's listener
calls `bump()`). Writes are seen through the ORM (new, changed or deleted rows; bulk
`update()` / `delete()` / `insert()` statements run through a session); a watched model can
name columns whose changes do not count (an API key's `last_used_at`).

While a worker cannot hear the others (its listener connection is down), `trusted()` is false
and caches must read through; `bump()` on reconnecting drops whatever was missed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.orm import ORMExecuteState, Session, UOWTransaction

_WATCHED: dict[str, frozenset[str]] = {}
"""Watched table → columns whose changes alone do not count."""
_FLAG = "quiver_config_changed"
_counter = itertools.count(1)
_version = 0
_deaf: set[int] = set()

Announcer = Callable[[Connection], None]
announcer: Announcer | None = None
"""Sends the cross-worker notification on the writing transaction's connection (set by the
run hub; None: this process is the only one, as on SQLite)."""


def watch(*tables: Any, ignore: Iterable[str] = ()) -> None:
    """Count committed writes to these tables (model classes or `Table`s)."""
    for table in tables:
        name = getattr(table, "__tablename__", None) or table.name
        _WATCHED[name] = frozenset(ignore)


def version() -> int:
    return _version


_listeners: list[Callable[[], None]] = []


def on_bump(listener: Callable[[], None]) -> Callable[[], None]:
    """Call `listener` (cheap, non-blocking) whenever cached configuration goes stale; returns
    a function that removes it. The tool rankers' warmer (pipeline/warm.py) listens."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener) if listener in _listeners else None


def bump() -> None:
    """Everything cached so far is stale."""
    global _version
    _version = next(_counter)
    for listener in list(_listeners):
        listener()


def set_deaf(owner: object, deaf: bool) -> None:
    """`owner` (a listener) cannot hear other workers' writes (or can again)."""
    if deaf:
        _deaf.add(id(owner))
    elif id(owner) in _deaf:
        _deaf.discard(id(owner))
        bump()  # what was written meanwhile was not heard


def trusted() -> bool:
    """May caches serve what they hold? Not while a listener is down."""
    return not _deaf


def _counts(obj: Any) -> bool:
    table = getattr(obj, "__tablename__", None)
    if table not in _WATCHED:
        return False
    ignored = _WATCHED[table]
    if not ignored:
        return True
    from sqlalchemy import inspect

    state = inspect(obj)
    if state.deleted or state.was_deleted or not state.has_identity:
        return True
    return any(attr.key not in ignored and attr.history.has_changes() for attr in state.attrs)


@event.listens_for(Session, "before_flush")
def _before_flush(session: Session, _flush: UOWTransaction, _instances: Any) -> None:
    if session.info.get(_FLAG):
        return
    for obj in itertools.chain(session.new, session.dirty, session.deleted):
        if _counts(obj):
            session.info[_FLAG] = True
            return


@event.listens_for(Session, "do_orm_execute")
def _on_execute(state: ORMExecuteState) -> None:
    if not (state.is_update or state.is_delete or state.is_insert):
        return
    table = getattr(state.statement, "table", None)
    if getattr(table, "name", None) in _WATCHED:
        state.session.info[_FLAG] = True


@event.listens_for(Session, "before_commit")
def _before_commit(session: Session) -> None:
    if not session.info.get(_FLAG) and not any(
        _counts(o) for o in itertools.chain(session.new, session.dirty, session.deleted)
    ):
        return
    session.info[_FLAG] = True
    if announcer is not None:
        announcer(session.connection())


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    if session.info.pop(_FLAG, False):
        bump()


@event.listens_for(Session, "after_soft_rollback")
def _after_rollback(session: Session, _previous: Any) -> None:
    session.info.pop(_FLAG, None)
