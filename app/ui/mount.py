"""Wires the console into the app: pages under `/ui`, vendored assets under `/ui/static`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

from app.kit.page_headers import SECURITY_HEADERS
from app.ui.render import HERE, install_handlers
from app.ui.router import router

STATIC_HEADERS = {k: v for k, v in SECURITY_HEADERS.items() if k != "Cache-Control"}
"""The pages' CSP and the rest on every asset too (an SVG opened on its own runs no script)."""


class ConsoleStatic(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        response: Any = await super().get_response(path, scope)
        response.headers.update(STATIC_HEADERS)
        return response  # type: ignore[no-any-return]


def install_console(app: FastAPI) -> None:
    install_handlers(app)
    app.include_router(router)
    app.mount("/ui/static", ConsoleStatic(directory=HERE / "static"), name="ui-static")
