"""Console sign-in: a pasted API key becomes a random session id in an HttpOnly cookie.

The key itself is never stored or sent back: the session row keeps the key's row id, and every
request re-checks that the key is still active. Each session has its own CSRF token; forms
carry it in a hidden field, `fetch` calls in the `X-CSRF-Token` header.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.apikeys.models import ApiKey
from app.apikeys.service import api_key_service
from app.db.base import utcnow
from app.errors import Forbidden
from app.tenancy.principal import Principal
from app.ui.api_auth import SESSION_COOKIE, live_session, session_hash, tokens_match
from app.ui.models import ConsoleSession
from app.ui.repository import ConsoleSessionRepository

PRELOGIN_COOKIE = "quiver_console_login"
"""Double-submit CSRF token of the sign-in form (there is no session yet)."""
CSRF_FIELD = "csrf_token"
SESSION_TTL = timedelta(hours=12)


def new_token() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Console:
    """The signed-in caller of a console page."""

    key: ApiKey
    csrf_token: str
    row: ConsoleSession
    flash: dict[str, Any] | None = None
    """The last form's outcome, taken from the session when this page was requested."""

    @property
    def admin(self) -> bool:
        return "admin" in self.key.scopes

    @property
    def principal(self) -> Principal:
        return Principal.of(self.key)

    def check_csrf(self, given: str | None) -> None:
        if not tokens_match(self.csrf_token, given):
            raise Forbidden("missing or invalid CSRF token")


async def sign_in(session: AsyncSession, api_key: str) -> tuple[str, ApiKey] | None:
    """A new session id for a valid key with scope admin or chat; None otherwise."""
    key = await api_key_service.authenticate(session, api_key.strip())
    if key is None or not {"admin", "chat"} & set(key.scopes):
        return None
    now = utcnow()
    repo = ConsoleSessionRepository(session)
    await repo.prune(now, key.id)
    session_id = new_token()
    await repo.add(
        ConsoleSession(
            id_hash=session_hash(session_id),
            api_key_id=key.id,
            csrf_token=new_token(),
            created_at=now,
            expires_at=now + SESSION_TTL,
        )
    )
    return session_id, key


async def current(session: AsyncSession, request: Request) -> Console | None:
    found = await live_session(session, request.cookies.get(SESSION_COOKIE))
    if found is None:
        return None
    row, key = found
    shown, row.flash = row.flash, None
    return Console(key=key, csrf_token=row.csrf_token, row=row, flash=shown)


def remember(
    console: Console,
    *,
    notice: str | None = None,
    error: str | None = None,
    fields: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    result: dict[str, Any] | None = None,
) -> None:
    """Keep a form's outcome for the next page (server-side, never in the address): a notice,
    or an error with the errors of single fields and the values sent (shown again); `result`:
    a tool test's answer, shown with either."""
    if error:
        console.row.flash = {"error": error, "fields": fields or {}, "values": values or {}}
    else:
        console.row.flash = {"notice": notice or ""}
    if result is not None:
        console.row.flash["result"] = result


async def sign_out(session: AsyncSession, request: Request) -> None:
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        await ConsoleSessionRepository(session).remove(session_hash(session_id))


def cookie_secure(request: Request) -> bool:
    """Secure when the browser talks HTTPS (directly or through a proxy that says so)."""
    forwarded = request.headers.get("x-forwarded-proto", "")
    return request.url.scheme == "https" or forwarded.split(",")[0].strip() == "https"
