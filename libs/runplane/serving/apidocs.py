"""Every HTTP API of runplane with its reference at ``/docs``, served offline.

FastAPI's own ``/docs`` page loads Swagger UI's script and stylesheet from a CDN, so on a
machine without internet it is blank, and ``/redoc`` the same. :func:`api_app` builds the
FastAPI app of a service with Swagger UI's files served by the service itself, from the
``swagger-ui-bundle-v2`` package (the swagger-ui-dist files, vendored in a wheel), at
``/docs/assets``; ``/docs`` is the same Swagger UI page FastAPI draws, pointing there, and
``/openapi.json`` the description. ReDoc is off: no package ships its files, and one
reference page is enough.

The journal's run API, the worklist's and admission's build their apps here.
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse
from swagger_ui_bundle import swagger_ui_path

__all__ = ["ASSETS_URL", "DOCS_URL", "api_app"]

DOCS_URL: Final = "/docs"
ASSETS_URL: Final = "/docs/assets"
_OAUTH2_REDIRECT: Final = "/docs/oauth2-redirect"


def api_app(*, title: str, version: str = "1", description: str = "", **kw: Any) -> FastAPI:
    """A FastAPI app whose ``/docs`` needs nothing from outside the service."""
    app = FastAPI(
        title=title,
        version=version,
        description=description,
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        **kw,
    )
    app.mount(ASSETS_URL, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")

    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{title} — API reference",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon-32x32.png",
            oauth2_redirect_url=root + _OAUTH2_REDIRECT,
        )

    async def oauth2_redirect(_: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_route(DOCS_URL, docs, methods=["GET"], include_in_schema=False)
    app.add_route(_OAUTH2_REDIRECT, oauth2_redirect, methods=["GET"], include_in_schema=False)
    return app
