"""The OAuth consent page (`/oauth/authorize`), behind the console sign-in (docs/oauth.md).

GET validates the client's authorization request (Authlib) and shows the person the client,
the agent and what the agent can reach; POST (same address, the console's CSRF token)
records the decision and sends the browser back to the client with a code or
`access_denied`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from app.agents.service import agent_service
from app.db.session import SessionDep
from app.errors import QuiverError
from app.kit.page_headers import SECURITY_HEADERS
from app.kit.state import SettingsDep
from app.oauth.metadata import AUTHORIZE_PATH
from app.oauth.server import key_may_use
from app.oauth.service import oauth_service
from app.ui import sessions
from app.ui.deps import CsrfField
from app.ui.pages_auth import login_page
from app.ui.render import page

router = APIRouter(include_in_schema=False)
_SOURCE = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:(//([a-zA-Z0-9.-]+|\[[0-9a-fA-F:.]+\])(:[0-9]+)?)?")
"""A CSP source expression: a scheme, and a host with an optional port."""


def _here(request: Request) -> str:
    query = request.url.query
    return AUTHORIZE_PATH + (f"?{query}" if query else "")


def _form_action(redirect_uri: str) -> str:
    """The consent page's CSP: its form's answer redirects to the client, which Chromium
    checks against `form-action`, so the client's origin (or app scheme) is added."""
    parts = urlsplit(redirect_uri)
    target = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    policy = SECURITY_HEADERS["Content-Security-Policy"]
    if not _SOURCE.fullmatch(target):  # nothing that could end the directive
        return policy
    return policy.replace("form-action 'self'", f"form-action 'self' {target}")


def _continue_page() -> Response:
    """A navigation from another site carries no SameSite=Strict cookie: load the page again
    from here (a same-site navigation), which carries the console session if there is one."""
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="refresh" content="0"><title>Quiver</title></head>'
        "<body><p>Continuing to Quiver…</p></body></html>"
    )
    return HTMLResponse(body, headers=SECURITY_HEADERS)


@router.get(AUTHORIZE_PATH, response_class=HTMLResponse)
async def authorize(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    console = await sessions.current(session, request)
    if console is None:
        if request.headers.get("sec-fetch-site") == "cross-site":
            return _continue_page()
        return login_page(request, next_path=_here(request))
    try:
        found = await oauth_service.consent(session, settings, request, console.key)
    except QuiverError as exc:
        return page(
            request, "forbidden.html", console, status_code=400, message=exc.message, status=400
        )
    if isinstance(found, Response):
        return found
    if not key_may_use(console.key, found.agent.id):
        message = f"your API key may not use agent {found.agent.name!r}"
        return page(
            request, "forbidden.html", console, status_code=403, message=message, status=403
        )
    agent = await agent_service.get(session, found.agent.id)
    response = page(
        request, "consent.html", console, consent=found, agent=agent, action=_here(request)
    )
    response.headers["Content-Security-Policy"] = _form_action(found.redirect_uri)
    return response


@router.post(AUTHORIZE_PATH)
async def decide(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    csrf_token: CsrfField,
    decision: Annotated[Literal["approve", "deny"], Form()],
) -> Response:
    console = await sessions.current(session, request)
    if console is None:
        return login_page(request, status_code=401, next_path=_here(request))
    console.check_csrf(csrf_token)
    try:
        return await oauth_service.decide(
            session, settings, request, console.key, approve=decision == "approve"
        )
    except QuiverError as exc:
        return page(
            request, "forbidden.html", console, status_code=400, message=exc.message, status=400
        )
