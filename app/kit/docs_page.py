"""`/docs`: Swagger UI 5 (it renders OpenAPI 3.1) from the `swagger-ui-bundle-v2` package, so
the page works offline, with the console's security headers: no framing, no inline code (the
start-up script is a file of its own, `/docs/init.js`)."""

from __future__ import annotations

import html
import json

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from app.kit.page_headers import SECURITY_HEADERS

DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
INIT_URL = "/docs/init.js"
REDIRECT_URL = "/docs/oauth2-redirect"

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" href="{assets}/favicon-32x32.png">
<title>{title}</title>
</head>
<body>
<div id="swagger-ui"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{init}"></script>
</body>
</html>
"""

_INIT = """window.ui = SwaggerUIBundle({
  url: %s,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  persistAuthorization: true,
  oauth2RedirectUrl: window.location.origin + %s,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""

_REDIRECT = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Swagger UI: OAuth2 redirect</title></head>
<body><script src="{assets}/oauth2-redirect.js"></script></body>
</html>
"""


def install_swagger_ui(app: FastAPI) -> None:
    app.mount(ASSETS_URL, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")
    openapi_url = app.openapi_url or "/openapi.json"
    page = _PAGE.format(
        assets=ASSETS_URL, init=INIT_URL, title=html.escape(f"{app.title} - API docs")
    )
    init = _INIT % (json.dumps(openapi_url), json.dumps(REDIRECT_URL))
    redirect = _REDIRECT.format(assets=ASSETS_URL)

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return HTMLResponse(page, headers=SECURITY_HEADERS)

    @app.get(INIT_URL, include_in_schema=False)
    async def swagger_ui_init() -> Response:
        return Response(init, media_type="text/javascript", headers=SECURITY_HEADERS)

    @app.get(REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return HTMLResponse(redirect, headers=SECURITY_HEADERS)
