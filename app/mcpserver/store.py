"""Every SQL statement of the MCP endpoint's sessions: their runs, the worker that serves
each, what a worker reads back from the journal to resume one, and the end of a session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.hub import CHANNEL, RELEASE_PREFIX
from app.chat.models import Conversation, Run, RunEventRecord
from app.chat.repository import RUNNING, RunRepository, WorkerRepository
from app.chat.run_store_pg import PostgresRunStore
from app.chat.runner import RunManager
from app.db.base import utcnow
from app.errors import RateLimited
from app.events import RunFinished, ToolResultEvent, event_payload
from app.mcpserver.state import RUN_KIND, Caller, aware
from app.tenancy.limits import count_run_start
from app.tenancy.repository import RunStartRepository

LOST_CALL = "the worker serving this call stopped before it finished; its outcome is unknown"
"""The error of a `tool_call` whose worker died in flight, closed when the session is taken
over or ends."""
SESSIONS_FULL_RETRY_S = 60

_ADMIT = """
WITH r AS (
    SELECT worker_id, EXTRACT(EPOCH FROM lease_until - now())::float8 AS left_s FROM runs
    WHERE id = $1 AND kind = $7 AND status = 'running' AND agent_id = $4
      AND api_key_id IS NOT DISTINCT FROM $5
    FOR NO KEY UPDATE
), u AS (
    UPDATE runs SET worker_id = $2, updated_at = $3, lease_until = now() + make_interval(secs => $6)
    WHERE id = $1 AND EXISTS (SELECT 1 FROM r)
      AND (worker_id = $2 OR lease_until IS NULL OR lease_until <= now())
    RETURNING 1
)
SELECT r.worker_id, r.left_s, EXISTS (SELECT 1 FROM u) AS granted FROM r
"""
"""`SessionStore.admit` on Postgres in one round trip: the session's run (open, of this agent
and key), locked, with the worker that held it last; the lease is taken (or renewed) unless
another worker holds it and it has not run out by the database's clock. The row lock makes
two workers' takeovers of one session queue: the second sees the first's lease (`NO KEY`: the
journal's inserts, whose foreign key share-locks the run, do not wait for it)."""
_RELEASE = """
WITH u AS (
    UPDATE runs SET lease_until = NULL
    WHERE id = $1 AND worker_id = $2 AND lease_until IS NOT NULL
    RETURNING id
)
SELECT count(pg_notify($3, id::text)) FROM u
"""
"""This worker lets go of a session (its run's waiters in other workers are woken)."""
_RELEASE_ALL = """
WITH u AS (
    UPDATE runs SET lease_until = NULL
    WHERE worker_id = $1 AND kind = $2 AND status = 'running' AND lease_until IS NOT NULL
    RETURNING id
)
SELECT count(pg_notify($3, id::text)) FROM u
"""
_RENEW = """
WITH u AS (
    UPDATE runs SET lease_until = now() + make_interval(secs => $3)
    WHERE id = ANY($1::uuid[]) AND worker_id = $2 AND status = 'running'
      AND lease_until IS NOT NULL
    RETURNING id
)
SELECT coalesce(array_agg(id), '{}') AS ids FROM u
"""
"""The leases of sessions with a call in flight here, kept while the call runs (one released
meanwhile stays released)."""
_ASK_RELEASE = "SELECT pg_notify($1, $2)"


@dataclass(frozen=True, kw_only=True)
class Admitted:
    """The session is open, of this agent and key. `granted`: this worker holds it now
    (`previous` held it before; None: nobody); else another worker's lease has `left_s`."""

    previous: uuid.UUID | None
    moved: bool
    granted: bool = True
    left_s: float = 0.0


@dataclass(kw_only=True)
class JournalSummary:
    """What a worker resuming a session reads back from its run's journal."""

    last_seq: int = 0
    calls: int = 0
    loaded: list[list[str]] = field(default_factory=list)
    open_calls: list[tuple[str, str]] = field(default_factory=list)
    """(call id, tool name) of `tool_call` events without a `tool_result`."""


def lost_result(call_id: str, name: str) -> ToolResultEvent:
    return ToolResultEvent(
        call_id=call_id, name=name, ok=False, output="", error=LOST_CALL, duration_ms=0.0
    )


class SessionStore:
    def __init__(self, runs: RunManager) -> None:
        self.runs = runs

    # --- opening -------------------------------------------------------------------------

    async def create_run(self, run_id: uuid.UUID, caller: Caller) -> uuid.UUID:
        """The session's conversation and run, counted against the key's run rate and its
        open sessions (`mcp_sessions_per_key`): 429 beyond either. The conversation's id."""
        agent, principal = caller.agent, caller.principal
        cap = self.runs.settings.mcp_sessions_per_key
        async with self.runs.sessionmaker() as session:
            await count_run_start(session, principal)
            if principal.rate_limit_per_minute is None:  # else the key is locked already
                await RunStartRepository(session).lock_key(principal.key_id)
            open_now = await session.scalar(
                select(func.count()).where(
                    Run.api_key_id == principal.key_id,
                    Run.kind == RUN_KIND,
                    Run.status == RUNNING,
                )
            )
            if int(open_now or 0) >= cap:
                raise RateLimited(
                    f"this API key has {cap} open MCP sessions, the most it may hold "
                    "(QUIVER_MCP_SESSIONS_PER_KEY): end one (DELETE with its Mcp-Session-Id) "
                    "or let one go idle",
                    retry_after=SESSIONS_FULL_RETRY_S,
                )
            conversation = Conversation(
                agent_id=agent.id,
                title="MCP session",
                api_key_id=principal.key_id,
                user=principal.user,
            )
            session.add(conversation)
            await session.flush()
            session.add(
                Run(
                    id=run_id,
                    kind=RUN_KIND,
                    conversation_id=conversation.id,
                    agent_id=agent.id,
                    worker_id=self.runs.worker_id,
                    api_key_id=principal.key_id,
                    user=principal.user,
                )
            )
            await session.commit()
            return conversation.id

    # --- which worker serves a session ---------------------------------------------------

    @property
    def leases(self) -> bool:
        """Are sessions held under leases? On a Postgres store the app owns (any number of
        workers). Otherwise one process serves the store (SQLite, a test's transaction)."""
        return isinstance(self.runs.store, PostgresRunStore)

    async def admit(
        self,
        db: AsyncSession | None,
        run_id: uuid.UUID,
        *,
        agent_id: uuid.UUID,
        key_id: uuid.UUID,
        touch_every_s: float,
    ) -> Admitted | None:
        """The session's run, if open and of this agent and key, and whether this worker
        holds it now (it takes the lease unless another worker holds a lease that has not
        run out; see `_ADMIT`).

        Without leases this runs in the caller's transaction `db` (or one of its own):
        activity is recorded coarsely (the sweep's idle clock), ownership at every move."""
        me = self.runs.worker_id
        store = self.runs.store
        if isinstance(store, PostgresRunStore):  # Postgres: one statement, no ORM
            lease_s = self.runs.settings.mcp_session_lease_s
            found = await store.fetchrow(
                _ADMIT, run_id, me, utcnow(), agent_id, key_id, lease_s, RUN_KIND
            )
            if found is None:
                return None
            previous: uuid.UUID | None = found["worker_id"]
            if not found["granted"]:
                return Admitted(
                    previous=previous, moved=True, granted=False, left_s=found["left_s"] or 0.0
                )
            return Admitted(previous=previous, moved=previous != me)
        if db is None:
            async with self.runs.sessionmaker() as own:
                admitted = await self._admit_orm(own, run_id, agent_id, key_id, touch_every_s)
                await own.commit()
                return admitted
        return await self._admit_orm(db, run_id, agent_id, key_id, touch_every_s)

    async def _admit_orm(
        self,
        db: AsyncSession,
        run_id: uuid.UUID,
        agent_id: uuid.UUID,
        key_id: uuid.UUID,
        touch_every_s: float,
    ) -> Admitted | None:
        me = self.runs.worker_id
        stmt = select(
            Run.kind, Run.status, Run.agent_id, Run.api_key_id, Run.worker_id, Run.updated_at
        ).where(Run.id == run_id)
        row = (await db.execute(stmt)).one_or_none()
        if row is None or (row.kind, row.status) != (RUN_KIND, RUNNING):
            return None
        if row.agent_id != agent_id or row.api_key_id != key_id:
            return None
        moved = row.worker_id != me
        if moved or (utcnow() - aware(row.updated_at)).total_seconds() > touch_every_s:
            await db.execute(
                update(Run)
                .where(Run.id == run_id, Run.status == RUNNING)
                .values(worker_id=me, updated_at=utcnow())
            )
        return Admitted(previous=row.worker_id, moved=moved)

    async def ask_release(self, run_id: uuid.UUID, holder: uuid.UUID | None) -> None:
        """Ask the worker holding the session to let go of it (`RunHub.on_release`)."""
        store = self.runs.store
        if isinstance(store, PostgresRunStore) and holder is not None:
            await store.fetchrow(_ASK_RELEASE, CHANNEL, f"{RELEASE_PREFIX}{run_id}:{holder}")

    async def release(self, run_id: uuid.UUID) -> None:
        """This worker lets go of the session: another one may take it at once."""
        store = self.runs.store
        if isinstance(store, PostgresRunStore):
            await store.fetchrow(_RELEASE, run_id, self.runs.worker_id, CHANNEL)

    async def release_all(self) -> None:
        """Shutdown: every session this worker holds may be taken at once."""
        store = self.runs.store
        if isinstance(store, PostgresRunStore):
            await store.fetchrow(_RELEASE_ALL, self.runs.worker_id, RUN_KIND, CHANNEL)

    async def renew(self, run_ids: list[uuid.UUID]) -> set[uuid.UUID]:
        """Keep the leases of these sessions (calls in flight); those this worker still held."""
        store = self.runs.store
        if not isinstance(store, PostgresRunStore):
            return set(run_ids)
        lease_s = self.runs.settings.mcp_session_lease_s
        found = await store.fetchrow(_RENEW, run_ids, self.runs.worker_id, lease_s)
        return set(found["ids"]) if found is not None else set()

    async def worker_alive(self, worker_id: uuid.UUID) -> bool:
        """Does that worker still beat? On SQLite (one process) another worker never does."""
        if self.runs.settings.is_sqlite:
            return worker_id == self.runs.worker_id
        lost_before = utcnow() - timedelta(seconds=self.runs.settings.worker_lost_after_s)
        async with self.runs.sessionmaker() as db:
            return await WorkerRepository(db).alive(worker_id, lost_before=lost_before)

    async def serving_worker(self, run_id: uuid.UUID) -> uuid.UUID | None:
        """The worker that served the session last, while its run is open."""
        async with self.runs.sessionmaker() as db:
            worker: uuid.UUID | None = await db.scalar(
                select(Run.worker_id).where(Run.id == run_id, Run.status == RUNNING)
            )
            return worker

    # --- the journal ---------------------------------------------------------------------

    async def summary(self, run_id: uuid.UUID) -> JournalSummary:
        async with self.runs.sessionmaker() as db:
            return await _summary(db, run_id)

    async def last_activity(self, run: Run) -> datetime:
        """When the session was last used: its run's last touch or its latest event."""
        async with self.runs.sessionmaker() as db:
            latest = await db.scalar(
                select(func.max(RunEventRecord.created_at)).where(RunEventRecord.run_id == run.id)
            )
        return max(aware(run.updated_at), aware(latest or run.updated_at))

    # --- ending --------------------------------------------------------------------------

    async def finish(self, run_id: uuid.UUID) -> bool:
        """Journal `run_finished` after the run's last event and settle it: once, however
        many workers try (the UPDATE is guarded by the run still running). A call left in
        flight by a dead worker gets its error result first. True if this call finished it."""
        async with self.runs.sessionmaker() as db:
            created = await db.scalar(select(Run.created_at).where(Run.id == run_id))
            found = await _summary(db, run_id)
            closed = await db.execute(
                update(Run)
                .where(
                    Run.id == run_id,
                    Run.status == RUNNING,
                    # never under another worker's lease: it may be serving a call
                    or_(
                        Run.worker_id == self.runs.worker_id,
                        Run.lease_until.is_(None),
                        Run.lease_until <= func.now(),
                    ),
                )
                .values(
                    status="completed",
                    iterations=found.calls,
                    usage={},
                    finished_at=utcnow(),
                    updated_at=utcnow(),
                )
            )
            if getattr(closed, "rowcount", 0) != 1:
                return False  # already finished (another worker, DELETE and idle at once),
                # or held by another worker
            repo = RunRepository(db)
            seq = found.last_seq
            for call_id, name in found.open_calls:
                seq += 1
                lost = lost_result(call_id, name)
                await repo.append_event(run_id, seq, lost.kind, event_payload(lost))
            elapsed = (utcnow() - aware(created or utcnow())).total_seconds()
            event = RunFinished(
                status="completed",
                iterations=found.calls,
                usage={},
                elapsed_ms=round(elapsed * 1000, 2),
            )
            await repo.append_event(run_id, seq + 1, event.kind, event_payload(event))
            await self.runs.hub.announce(db, run_id)
            await db.commit()
        self.runs.hub.wake(run_id)
        return True


async def _summary(db: AsyncSession, run_id: uuid.UUID) -> JournalSummary:
    events = RunEventRecord.run_id == run_id
    found = JournalSummary()
    found.last_seq = int(await db.scalar(select(func.max(RunEventRecord.seq)).where(events)) or 0)
    rows = await db.execute(
        select(RunEventRecord.kind, RunEventRecord.data)
        .where(events, RunEventRecord.kind.in_(("tool_call", "tool_result", "tools_loaded")))
        .order_by(RunEventRecord.seq)
    )
    pending: dict[str, str] = {}
    for kind, data in rows.all():
        payload: dict[str, Any] = data or {}
        if kind == "tools_loaded":
            found.loaded.append(list(payload.get("names") or []))
        elif kind == "tool_call":
            found.calls += 1
            pending[str(payload.get("call_id"))] = str(payload.get("name"))
        else:
            pending.pop(str(payload.get("call_id")), None)
    found.open_calls = list(pending.items())
    return found
