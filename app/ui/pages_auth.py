"""Sign-in, sign-out and the console's home."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from app.db.session import SessionDep
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


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> Response:
    token = sessions.new_token()
    response = page(request, "login.html", None, login_token=token)
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


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    session: SessionDep,
    api_key: Annotated[str, Form(max_length=1024)],
    csrf_token: CsrfField,
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
        token = sessions.new_token()
        response = page(
            request,
            "login.html",
            None,
            status_code=401,
            login_token=token,
            failure="invalid or revoked API key (or one without scope admin or chat)",
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
    session_id, key = signed_in
    redirect = back("/ui/agents" if "admin" in key.scopes else "/ui/playground")
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
    request: Request, session: SessionDep, console: ConsoleDep, csrf_token: CsrfField
) -> Response:
    console.check_csrf(csrf_token)
    await sessions.sign_out(session, request)
    response = back("/ui/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
