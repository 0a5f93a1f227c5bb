"""The run start store's contract (`app/chat/run_store.py`), run against each implementation.

The same scenarios go through `PostgresRunStore` (one statement on its asyncpg pool, the path of
a Postgres store the app owns), `SessionRunStore` on Postgres (an app given a sessionmaker) and
`SessionRunStore` on SQLite, driven the way `RunManager.start` drives them. Each scenario ends
with the rows the store wrote (conversations, runs, messages, journal, rate counts), ids replaced
by names, compared with one expected value: the stores store alike, and refuse alike (same
error, same message, nothing written).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.models import Agent
from app.apikeys.models import ApiKey
from app.chat.active import message_row
from app.chat.hub import RunHub
from app.chat.journal import JournalBatcher
from app.chat.liveness import WorkerLiveness
from app.chat.models import Conversation, Message, Run, RunEventRecord
from app.chat.pgwrite import Settle, asyncpg_dsn
from app.chat.run_store import FirstEvent, Opened, RunStart, RunStartStore
from app.chat.run_store_pg import PostgresRunStore
from app.chat.run_store_session import SessionRunStore
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.errors import Conflict, Invalid, NotFound, QuiverError, RateLimited
from app.llm.types import ChatMessage
from app.tenancy.models import RunStart as RunStartRow
from app.tenancy.principal import Principal
from tests.conftest import migrated_sqlite

STORES = ("postgres", "postgres-session", "sqlite")
FIRST: FirstEvent = ("run_started", {"agent": "contract", "tools": 0})


@dataclass
class Rig:
    """One store with what `RunManager` gives it: a worker's liveness and the journal."""

    store: RunStartStore
    liveness: WorkerLiveness
    sessionmaker: async_sessionmaker[AsyncSession]
    journal: JournalBatcher
    names: dict[uuid.UUID, str] = field(default_factory=dict)

    def name(self, id: uuid.UUID | None, label: str) -> uuid.UUID | None:
        if id is not None:
            self.names[id] = label
        return id

    def named(self, id: uuid.UUID | None) -> str | None:
        return None if id is None else self.names.get(id, "unnamed")

    async def add_agent(self, label: str) -> uuid.UUID:
        agent = Agent(id=uuid.uuid4(), name=f"{label}-{uuid.uuid4().hex[:8]}")
        async with self.sessionmaker() as session:
            session.add(agent)
            await session.commit()
        self.name(agent.id, label)
        return agent.id

    async def add_key(self, label: str, *, per_minute: int | None = None) -> Principal:
        key = ApiKey(
            id=uuid.uuid4(),
            name=label,
            key_hash=hashlib.sha256(uuid.uuid4().bytes).hexdigest(),
            prefix="qv_contract",
            scopes=["chat"],
            rate_limit_per_minute=per_minute,
        )
        async with self.sessionmaker() as session:
            session.add(key)
            await session.commit()
        self.name(key.id, label)
        return Principal(key_id=key.id, admin=False, rate_limit_per_minute=per_minute)

    async def start(self, label: str, start: RunStart) -> Opened:
        """As `RunManager.start`: claimed while stored, then kept claimed (executing here)
        until `finish` or `abandon`; the first event stored with the run, or journaled."""
        self.name(start.run_id, label)
        self.liveness.claim(start.run_id)
        try:
            opened = await self.store.open(start)
            if opened.deferred is None:
                await self.journal.enqueue(start.run_id, 1, *FIRST, None)
            else:
                stored = asyncio.get_running_loop().create_future()
                write = opened.deferred.store(FIRST, stored)
                with contextlib.suppress(Exception):
                    await write  # as the run's publisher does; `stored` says how it went
                await stored
        except BaseException:
            self.liveness.unclaim(start.run_id)
            raise
        self.names.setdefault(opened.conversation_id, f"conversation of {label}")
        return opened

    async def finish(self, run_id: uuid.UUID, conversation_id: uuid.UUID, reply: str) -> None:
        """The run's end as the journal stores it: its final event, state and reply."""
        settle = Settle(
            run_id=run_id,
            status="completed",
            iterations=1,
            usage={},
            conversation_id=conversation_id,
            messages=[message_row(ChatMessage.assistant(reply))],
        )
        await self.journal.enqueue(run_id, 2, "run_finished", {"status": "completed"}, settle)
        self.liveness.unclaim(run_id)

    def abandon(self, run_id: uuid.UUID) -> None:
        """This worker no longer executes the run (as if it had died with another)."""
        self.liveness.unclaim(run_id)

    async def rows(self) -> dict[str, Any]:
        """What the stores wrote for this test's agents and keys, ids named."""
        n = self.named
        agents, keys = self._ids("agent"), self._ids("key")
        async with self.sessionmaker() as s:
            conversations = (
                await s.scalars(select(Conversation).where(Conversation.agent_id.in_(agents)))
            ).all()
            ids = [c.id for c in conversations]
            runs = (await s.scalars(select(Run).where(Run.conversation_id.in_(ids)))).all()
            messages = (
                await s.scalars(select(Message).where(Message.conversation_id.in_(ids)))
            ).all()
            events = (
                await s.scalars(
                    select(RunEventRecord).where(RunEventRecord.run_id.in_([r.id for r in runs]))
                )
            ).all()
            counted = await s.scalar(
                select(func.count())
                .select_from(RunStartRow)
                .where(RunStartRow.api_key_id.in_(keys))
            )
        me = self.liveness.worker_id
        return {
            "conversations": sorted(
                (n(c.id), n(c.agent_id), c.title, n(c.api_key_id), c.user) for c in conversations
            ),
            "runs": sorted(
                (
                    n(r.id),
                    n(r.conversation_id),
                    n(r.agent_id),
                    r.kind,
                    r.status,
                    r.worker_id == me,
                    n(r.api_key_id),
                    r.user,
                    r.error["code"] if r.error else None,
                )
                for r in runs
            ),
            "messages": sorted(
                (n(m.conversation_id), m.seq, n(m.run_id), m.role, m.content) for m in messages
            ),
            "events": sorted((n(e.run_id), e.seq, e.kind, e.data) for e in events),
            "rate counts": counted,
        }

    def _ids(self, prefix: str) -> list[uuid.UUID]:
        return [i for i, label in self.names.items() if label.startswith(prefix)]

    async def forget(self) -> None:
        """Drop what the test wrote (a shared Postgres database)."""
        agents, keys = self._ids("agent"), self._ids("key")
        async with self.sessionmaker() as s:
            await s.execute(delete(Conversation).where(Conversation.agent_id.in_(agents)))
            await s.execute(delete(ApiKey).where(ApiKey.id.in_(keys)))
            await s.execute(delete(Agent).where(Agent.id.in_(agents)))
            await s.commit()


@pytest.fixture(params=STORES)
async def rig(
    request: pytest.FixtureRequest, committing_settings: Settings, tmp_path: Path
) -> AsyncIterator[Rig]:
    kind: str = request.param
    if kind == "sqlite":
        settings = await migrated_sqlite(tmp_path / "data")
    else:
        settings = committing_settings
    engine = create_engine(settings)
    sessionmaker = create_sessionmaker(engine)
    dsn = asyncpg_dsn(settings.async_database_url) if kind == "postgres" else None
    hub = RunHub(notify=not settings.is_sqlite)
    liveness = WorkerLiveness(
        settings=settings,
        hub=hub,
        background=sessionmaker,
        executing=set(),
        cancel_local=lambda _run_id: None,
    )
    session_store = SessionRunStore(sessionmaker, liveness)
    store: RunStartStore = (
        PostgresRunStore(dsn, session=session_store) if dsn is not None else session_store
    )
    journal = JournalBatcher(sessionmaker=sessionmaker, hub=hub, dsn=dsn)
    rig = Rig(store=store, liveness=liveness, sessionmaker=sessionmaker, journal=journal)
    try:
        yield rig
    finally:
        await journal.aclose()
        await store.aclose()
        if not settings.is_sqlite:
            await rig.forget()
        await engine.dispose()


def new_start(
    agent_id: uuid.UUID,
    principal: Principal,
    message: str,
    *,
    conversation_id: uuid.UUID | None = None,
    history: tuple[ChatMessage, ...] = (),
) -> RunStart:
    return RunStart(
        run_id=uuid.uuid4(),
        agent_id=agent_id,
        principal=principal,
        message=message,
        conversation_id=conversation_id,
        history=history,
    )


async def test_a_run_in_a_new_conversation(rig: Rig) -> None:
    agent = await rig.add_agent("agent")
    key = await rig.add_key("key")
    ann = Principal(key_id=key.key_id, admin=False, user="ann")
    message = (
        "a first question, long enough that the conversation's title is cut at 80 chars, here."
    )
    opened = await rig.start("run", new_start(agent, ann, message))
    assert opened.history == []
    assert await rig.rows() == {
        "conversations": [("conversation of run", "agent", message[:80], "key", "ann")],
        "runs": [
            ("run", "conversation of run", "agent", "chat", "running", True, "key", "ann", None)
        ],
        "messages": [("conversation of run", 1, "run", "user", message)],
        "events": [("run", 1, *FIRST)],
        "rate counts": 0,
    }


async def test_a_run_that_continues_a_conversation_gets_its_history(rig: Rig) -> None:
    agent = await rig.add_agent("agent")
    key = await rig.add_key("key")
    first = await rig.start("one", new_start(agent, key, "hello"))
    await rig.finish(rig_id(rig, "one"), first.conversation_id, "hi there")
    second = new_start(agent, key, "and then?", conversation_id=first.conversation_id)
    opened = await rig.start("two", second)
    assert opened.conversation_id == first.conversation_id
    assert opened.history == [ChatMessage.user("hello"), ChatMessage.assistant("hi there")]
    conversation = "conversation of one"
    assert await rig.rows() == {
        "conversations": [(conversation, "agent", "hello", "key", None)],
        "runs": [
            ("one", conversation, "agent", "chat", "completed", True, "key", None, None),
            ("two", conversation, "agent", "chat", "running", True, "key", None, None),
        ],
        "messages": [
            (conversation, 1, "one", "user", "hello"),
            (conversation, 2, "one", "assistant", "hi there"),
            (conversation, 3, "two", "user", "and then?"),
        ],
        "events": [
            ("one", 1, *FIRST),
            ("one", 2, "run_finished", {"status": "completed"}),
            ("two", 1, *FIRST),
        ],
        "rate counts": 0,
    }


async def test_a_clients_history_opens_the_conversation(rig: Rig) -> None:
    agent = await rig.add_agent("agent")
    key = await rig.add_key("key")
    sent = (ChatMessage.user("2 + 2?"), ChatMessage.assistant("4"))
    opened = await rig.start("run", new_start(agent, key, "and 3 + 3?", history=sent))
    assert opened.history == list(sent)
    rows = await rig.rows()
    assert rows["messages"] == [
        ("conversation of run", 1, "run", "user", "2 + 2?"),
        ("conversation of run", 2, "run", "assistant", "4"),
        ("conversation of run", 3, "run", "user", "and 3 + 3?"),
    ]
    assert rows["events"] == [("run", 1, *FIRST)]


def rig_id(rig: Rig, label: str) -> uuid.UUID:
    return next(i for i, name in rig.names.items() if name == label)


REFUSALS = {
    "a deleted agent": (NotFound, "agent {gone!r} not found"),
    "an unknown conversation": (NotFound, "conversation {gone!r} not found"),
    "another key's conversation": (NotFound, "conversation {conversation!r} not found"),
    "another agent's conversation": (
        Invalid,
        "conversation_id: the conversation belongs to another agent",
    ),
    "a conversation with a run in progress": (
        Conflict,
        "a run is already in progress in this conversation; wait for it to finish or cancel "
        "it (POST /api/v1/runs/{{run_id}}/cancel)",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
async def test_refusals_are_alike_and_store_nothing(rig: Rig, case: str) -> None:
    agent = await rig.add_agent("agent")
    other_agent = await rig.add_agent("agent other")
    key = await rig.add_key("key")
    stranger = await rig.add_key("key stranger")
    opened = await rig.start("busy", new_start(agent, key, "hello"))
    conversation = opened.conversation_id
    gone = uuid.uuid4()
    start = {
        "a deleted agent": new_start(gone, key, "hi"),
        "an unknown conversation": new_start(agent, key, "hi", conversation_id=gone),
        "another key's conversation": new_start(
            agent, stranger, "hi", conversation_id=conversation
        ),
        "another agent's conversation": new_start(
            other_agent, key, "hi", conversation_id=conversation
        ),
        "a conversation with a run in progress": new_start(
            agent, key, "hi", conversation_id=conversation
        ),
    }[case]
    before = await rig.rows()
    error, message = REFUSALS[case]
    with pytest.raises(QuiverError) as refused:
        await rig.start("refused", start)
    assert type(refused.value) is error
    assert refused.value.message == message.format(gone=str(gone), conversation=str(conversation))
    assert await rig.rows() == before
    assert not rig.liveness._here(start.run_id)


async def test_a_run_whose_worker_is_gone_no_longer_blocks_its_conversation(rig: Rig) -> None:
    agent = await rig.add_agent("agent")
    key = await rig.add_key("key")
    first = await rig.start("lost", new_start(agent, key, "hello"))
    rig.abandon(rig_id(rig, "lost"))
    await rig.start(
        "next", new_start(agent, key, "still there?", conversation_id=first.conversation_id)
    )
    rows = await rig.rows()
    conversation = "conversation of lost"
    assert rows["runs"] == [
        ("lost", conversation, "agent", "chat", "failed", True, "key", None, "run_lost"),
        ("next", conversation, "agent", "chat", "running", True, "key", None, None),
    ]
    assert [(run, seq, kind) for run, seq, kind, _ in rows["events"]] == [
        ("lost", 1, "run_started"),
        ("lost", 2, "run_failed"),
        ("next", 1, "run_started"),
    ]
    assert rows["messages"] == [
        (conversation, 1, "lost", "user", "hello"),
        (conversation, 2, "next", "user", "still there?"),
    ]


async def test_the_keys_rate_limit_counts_and_refuses_alike(rig: Rig) -> None:
    agent = await rig.add_agent("agent")
    key = await rig.add_key("key limited", per_minute=2)
    first = await rig.start("one", new_start(agent, key, "one"))
    await rig.finish(rig_id(rig, "one"), first.conversation_id, "ok")
    await rig.start("two", new_start(agent, key, "two", conversation_id=first.conversation_id))
    before = await rig.rows()
    assert before["rate counts"] == 2
    with pytest.raises(RateLimited) as refused:
        await rig.start("three", new_start(agent, key, "three"))
    assert refused.value.message == "this API key may start 2 run(s) per minute; retry later"
    assert 1 <= refused.value.retry_after <= 60
    assert await rig.rows() == before


async def test_concurrent_starts_in_one_conversation_store_one_run(rig: Rig) -> None:
    agent = await rig.add_agent("agent")
    key = await rig.add_key("key")
    first = await rig.start("one", new_start(agent, key, "hello"))
    await rig.finish(rig_id(rig, "one"), first.conversation_id, "hi")
    starts = [
        new_start(agent, key, f"racing {i}", conversation_id=first.conversation_id)
        for i in range(4)
    ]
    results = await asyncio.gather(
        *(rig.start(f"racer {i}", s) for i, s in enumerate(starts)), return_exceptions=True
    )
    won = [r for r in results if isinstance(r, Opened)]
    assert len(won) == 1, results
    assert all(isinstance(r, Conflict) for r in results if not isinstance(r, Opened)), results
    rows = await rig.rows()
    assert [(run, status) for run, _, _, _, status, *_ in rows["runs"]] == [
        ("one", "completed"),
        *((f"racer {i}", "running") for i, r in enumerate(results) if isinstance(r, Opened)),
    ]
    assert [seq for _, seq, *_ in rows["messages"]] == [1, 2, 3]
