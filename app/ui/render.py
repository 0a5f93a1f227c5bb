"""Templates, the page response and the console's exceptions (sign-in redirect, HTML 403)."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from app.errors import Forbidden, QuiverError, error_body
from app.kit.page_headers import SECURITY_HEADERS
from app.ui.sessions import Console

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["pretty_json"] = lambda value: json.dumps(
    value, indent=2, ensure_ascii=False, default=str
)


@dataclass(frozen=True)
class KeyView:
    name: str
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class NavOnly:
    """What the navigation shows of a signed-in caller, copied when the page started: an
    error page renders after the request's database session has ended."""

    key: KeyView
    admin: bool
    csrf_token: str
    flash: None = None

    @classmethod
    def of(cls, console: Console) -> NavOnly:
        key = KeyView(console.key.name, tuple(console.key.scopes))
        return cls(key=key, admin=console.admin, csrf_token=console.csrf_token)


class SignInRequired(Exception):
    """No live console session: the page answers a redirect to the sign-in form."""


class PageForbidden(Forbidden):
    """A page the signed-in key may not open (a chat key on the resources pages)."""


def page(
    request: Request,
    template: str,
    console: Console | NavOnly | None,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    response = templates.TemplateResponse(
        request,
        template,
        {
            "console": console,
            "csrf_token": console.csrf_token if console else "",
            "notice": (console.flash or {}).get("notice") if console else None,
            "error": (console.flash or {}).get("error") if console else None,
            "field_errors": (console.flash or {}).get("fields", {}) if console else {},
            "sent": (console.flash or {}).get("values", {}) if console else {},
            "result": (console.flash or {}).get("result") if console else None,
            **context,
        },
        status_code=status_code,
    )
    response.headers.update(SECURITY_HEADERS)
    return response


def back(path: str) -> RedirectResponse:
    """303 to a console page (Post/Redirect/Get)."""
    return RedirectResponse(path, status_code=303)


def install_handlers(app: FastAPI) -> None:
    async def sign_in_required(request: Request, exc: Exception) -> Response:
        return RedirectResponse("/ui/login", status_code=303)

    async def forbidden(request: Request, exc: Exception) -> Response:
        message = exc.message if isinstance(exc, Forbidden) else "forbidden"
        nav = getattr(request.state, "nav", None)
        return page(request, "forbidden.html", nav, status_code=403, message=message, status=403)

    api_handler = app.exception_handlers.get(QuiverError)

    async def not_found_page(request: Request, exc: Exception) -> Response:
        """An unknown id on a console page is a page; everything else keeps the API's shape."""
        if (
            isinstance(exc, QuiverError)
            and exc.status_code == 404
            and request.method == "GET"
            and request.url.path.startswith("/ui/")
        ):
            nav = getattr(request.state, "nav", None)
            return page(
                request, "forbidden.html", nav, status_code=404, message=exc.message, status=404
            )
        if api_handler is not None:
            result = api_handler(request, exc)
            return await result if inspect.isawaitable(result) else result
        message = exc.message if isinstance(exc, QuiverError) else "error"
        kind = exc.kind if isinstance(exc, QuiverError) else "Error"
        code = exc.status_code if isinstance(exc, QuiverError) else 400
        return JSONResponse(error_body(kind, message), code)

    app.add_exception_handler(SignInRequired, sign_in_required)
    app.add_exception_handler(PageForbidden, forbidden)
    app.add_exception_handler(QuiverError, not_found_page)
