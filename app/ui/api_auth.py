"""The console's session accepted on the chat-scope API routes (`/chat`, runs, tool calls).

The playground's `fetch` calls send the session cookie and the session's CSRF token in the
`X-CSRF-Token` header; both must match, on every method (GET included), so another site can
neither post nor read with the cookie. Admin-scope routes never accept the cookie.
"""

from __future__ import annotations

import hashlib
import hmac

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.apikeys.models import ApiKey
from app.db.base import utcnow
from app.ui.models import ConsoleSession
from app.ui.repository import ConsoleSessionRepository

SESSION_COOKIE = "quiver_console"
CSRF_HEADER = "x-csrf-token"


def session_hash(session_id: str) -> str:
    """What the session table stores of a session id."""
    return hashlib.sha256(session_id.encode()).hexdigest()


def tokens_match(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def has_console_credentials(cookie_header: str, csrf_header: str) -> bool:
    """Cheap pre-check (no database): a session cookie and a CSRF header are both present."""
    return bool(csrf_header.strip()) and f"{SESSION_COOKIE}=" in cookie_header


def console_precheck(headers: dict[bytes, bytes]) -> bool:
    """`has_console_credentials` on raw ASGI headers (for the API's bearer pre-check)."""
    return has_console_credentials(
        headers.get(b"cookie", b"").decode("latin-1"),
        headers.get(b"x-csrf-token", b"").decode("latin-1"),
    )


async def live_session(
    session: AsyncSession, session_id: str | None
) -> tuple[ConsoleSession, ApiKey] | None:
    """The unexpired session the cookie value names, with its API key (None when there is none)."""
    if not session_id:
        return None
    return await ConsoleSessionRepository(session).live_with_key(session_hash(session_id), utcnow())


async def console_api_key(request: Request, session: AsyncSession) -> ApiKey | None:
    """The session's API key when the cookie names a live session and the header its token."""
    given = request.headers.get(CSRF_HEADER)
    found = await live_session(session, request.cookies.get(SESSION_COOKIE)) if given else None
    if found is None:
        return None
    row, key = found
    return key if tokens_match(row.csrf_token, given) else None
