"""Wires the console into the app: pages under `/ui`, vendored assets under `/ui/static`."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.ui.render import HERE, install_handlers
from app.ui.router import router


def install_console(app: FastAPI) -> None:
    install_handlers(app)
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
