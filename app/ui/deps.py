"""The console pages' shared pieces: session and admin dependencies, form outcomes."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Form, Query, Request, UploadFile
from fastapi.responses import RedirectResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.session import SessionDep
from app.errors import Invalid, QuiverError
from app.kit.request_guard import NUL_MESSAGE
from app.kit.schemas import SLUG_PATTERN
from app.ui import sessions
from app.ui.render import NavOnly, PageForbidden, SignInRequired, back
from app.ui.sessions import CSRF_FIELD, Console

PAGE = 25
"""Rows per page of the console's lists."""
LIST_ALL = 1000
"""At most this many of each kind in the console's pickers (agents, connectors, ...)."""
MAX_UPLOAD = 5_000_000
RUN_STATUSES = ("running", "completed", "max_iterations", "stopped", "cancelled", "failed")
TOOL_KINDS = ("connector", "database", "mcp", "skill", "knowledge", "agent", "builtin")


async def signed_in(request: Request, session: SessionDep) -> Console:
    console = await sessions.current(session, request)
    if console is None:
        raise SignInRequired()
    request.state.nav = NavOnly.of(console)  # the 403 and 404 pages keep the navigation
    return console


async def admin_only(console: Annotated[Console, Depends(signed_in)]) -> Console:
    if not console.admin:
        raise PageForbidden("this page needs an API key with scope 'admin'")
    return console


ConsoleDep = Annotated[Console, Depends(signed_in)]
AdminDep = Annotated[Console, Depends(admin_only)]
CsrfField = Annotated[str, Form(alias=CSRF_FIELD)]
"""Optional in the form schema so a form without it is a 403 (`Console.check_csrf`), not a 422."""
Offset = Annotated[int, Query(ge=0)]


async def failed(
    session: AsyncSession, console: Console, path: str, error: str
) -> RedirectResponse:
    """Undo the form's writes, keep its error for the next page."""
    await session.rollback()
    sessions.remember(console, error=error)
    return back(path)


def done(console: Console, path: str, notice: str) -> RedirectResponse:
    sessions.remember(console, notice=notice)
    return back(path)


@dataclass(frozen=True)
class AdminForm:
    """An admin's console form post, its CSRF token already checked."""

    session: AsyncSession
    console: Console

    async def submit(
        self, path: str, write: Callable[[], Awaitable[RedirectResponse]]
    ) -> RedirectResponse:
        """Run the form's write (which answers `done`); a refused write is undone and its
        error shown on `path`."""
        try:
            return await write()
        except QuiverError as exc:
            return await failed(self.session, self.console, path, exc.message)
        except ValueError as exc:
            return await failed(self.session, self.console, path, first_error(exc))


async def admin_form(
    session: SessionDep, console: AdminDep, csrf_token: CsrfField = ""
) -> AdminForm:
    console.check_csrf(csrf_token)
    return AdminForm(session, console)


AdminFormDep = Annotated[AdminForm, Depends(admin_form)]


async def upload_text(file: UploadFile | None) -> str:
    if file is None or not file.filename:
        return ""
    raw = await file.read(MAX_UPLOAD + 1)
    if len(raw) > MAX_UPLOAD:
        raise Invalid(f"file: larger than {MAX_UPLOAD // 1_000_000} MB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("file: not UTF-8 text") from None
    if "\x00" in text:
        raise Invalid(f"file: {NUL_MESSAGE}")
    return text


def uuid_or_none(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value.strip()) if value.strip() else None
    except ValueError:
        return None


NAME_RULE = (
    "lowercase letters, digits, - and _, up to 64 characters, starting with a letter or digit"
)
"""What a resource name (`Slug`) may be, in words rather than its regular expression."""


def first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        found = errors()
        if found:
            where = ".".join(str(p) for p in found[0].get("loc", ()))
            pattern = (found[0].get("ctx") or {}).get("pattern")
            if found[0].get("type") == "string_pattern_mismatch" and pattern == SLUG_PATTERN:
                return f"{where}: {NAME_RULE}"
            return f"{where}: {found[0].get('msg', 'invalid')}"
    return str(exc)[:300]
