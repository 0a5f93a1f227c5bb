"""Sign-in, sign-out and the console's home."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from app.apikeys.auth import failed_attempt
from app.db.session import SessionDep
from app.errors import RateLimited, Unauthorized
from app.oauth.metadata import AUTHORIZE_PATH
from app.ui import sessions
from app.ui.api_auth import SESSION_COOKIE, tokens_match
from app.ui.deps import (
    ConsoleDep,
    CsrfField,
)
from app.ui.render import back, page
from app.ui.sessions import PRELOGIN_COOKIE

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("", response_class=HTMLResponse)
async def home(request: Request, session: SessionDep) -> Response:
    console = await sessions.current(session, request)
    if console is None:
        return back("/ui/login")
    return back("/ui/agents" if console.admin else "/ui/playground")


def safe_next(value: str) -> str | None:
    """Where a sign-in may continue: only the OAuth consent page (an absolute path here)."""
    if value == AUTHORIZE_PATH or value.startswith(AUTHORIZE_PATH + "?"):
        return value
    return None


def login_page(
    request: Request, *, status_code: int = 200, failure: str | None = None, next_path: str = ""
) -> Response:
    """The sign-in form with a fresh pre-login CSRF token (in the form and in a cookie)."""
    token = sessions.new_token()
    response = page(
        request,
        "login.html",
        None,
        status_code=status_code,
        login_token=token,
        failure=failure,
        next_path=safe_next(next_path) or "",
    )
    response.set_cookie(
        PRELOGIN_COOKIE,
        token,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=sessions.cookie_secure(request),
        max_age=3600,
    )
    return response


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> Response:
    return login_page(request)


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    session: SessionDep,
    api_key: Annotated[str, Form(max_length=1024)] = "",
    csrf_token: CsrfField = "",
    next_path: Annotated[str, Form(alias="next", max_length=8192)] = "",
) -> Response:
    expected = request.cookies.get(PRELOGIN_COOKIE, "")
    if not expected or not tokens_match(expected, csrf_token):
        return page(
            request,
            "forbidden.html",
            None,
            status_code=403,
            message="missing or invalid CSRF token: reload the sign-in page",
            status=403,
        )
    await sessions.sign_out(session, request)  # a new sign-in never reuses an old session
    signed_in = await sessions.sign_in(session, api_key)
    if signed_in is None:
        client = (request.client.host, request.client.port) if request.client else None
        error = failed_attempt(
            request.app,
            client,
            Unauthorized("invalid or revoked API key (or one without scope admin or chat)"),
        )
        response = login_page(
            request, status_code=error.status_code, failure=error.message, next_path=next_path
        )
        if isinstance(error, RateLimited):
            response.headers.update(error.headers() or {})
        return response
    session_id, key = signed_in
    home = "/ui/agents" if "admin" in key.scopes else "/ui/playground"
    redirect = back(safe_next(next_path) or home)
    redirect.set_cookie(
        SESSION_COOKIE,
        session_id,
        path="/",
        httponly=True,
        samesite="strict",
        secure=sessions.cookie_secure(request),
        max_age=int(sessions.SESSION_TTL.total_seconds()),
    )
    redirect.delete_cookie(PRELOGIN_COOKIE, path="/ui")
    return redirect


@router.post("/logout")
async def logout(
    request: Request, session: SessionDep, console: ConsoleDep, csrf_token: CsrfField = ""
) -> Response:
    console.check_csrf(csrf_token)
    await sessions.sign_out(session, request)
    response = back("/ui/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
