"""The dashboard at /ui and Swagger UI at /docs, both served from files inside the package (no outside assets).

    GET /ui, /ui/              the page (a static shell; `ui/index.html`)
    GET /ui/<file>             its ES modules and stylesheet (`ui/*.js`, `ui/app.css`, `ui/favicon.svg`)
    GET /ui/vendor/<file>      Swagger UI's bundle and stylesheet (swagger-ui-dist, pinned; its licence beside them)
    GET /docs                  FastAPI's Swagger UI page, loading those vendored files instead of a CDN's

The page holds no data: everything it shows it reads in the browser from the API itself (lists, then watches with
`?watch=1&resourceVersion=`), and every action is the API's own request (server-side apply, DELETE, and the
simulator's steps under `devplace up`), so the API's authentication and authorization decide everything; the
files are public (`authz.PUBLIC_PATHS`) and the page asks for a token when the API answers 401. It keeps the token
in a variable only: no cookie, no storage.

Device properties come from devices nobody controls, so the page builds every node with `textContent` and
`createElement`, never `innerHTML`; and every /ui response carries a Content-Security-Policy (`CSP`) that allows only
this origin's scripts, styles, images and connections, no inline script, no plugins, no framing. /docs keeps
FastAPI's page (it has an inline script that starts Swagger UI), with its favicon also served from here.

The files are read once, when the router is built, into a fixed table: a request names a file of that table or gets
404, so no path reaches the file system.
"""

from __future__ import annotations

from importlib import resources
from typing import Final

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

from devplace import errors

CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
"""The Content-Security-Policy of every /ui response."""

_MEDIA_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}
_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
SWAGGER_JS: Final = "/ui/vendor/swagger-ui-bundle.js"
SWAGGER_CSS: Final = "/ui/vendor/swagger-ui.css"
FAVICON: Final = "/ui/favicon.svg"


def _media_type(name: str) -> str | None:
    if name in ("LICENSE", "NOTICE"):
        return _MEDIA_TYPES[".txt"]
    for suffix, media in _MEDIA_TYPES.items():
        if name.endswith(suffix):
            return media
    return None


def assets() -> dict[str, tuple[bytes, str]]:
    """URL path under /ui -> (content, media type), for every file the package ships in `server/ui`."""
    root = resources.files("devplace.server").joinpath("ui")
    found: dict[str, tuple[bytes, str]] = {}
    for folder, prefix in ((root, ""), (root.joinpath("vendor"), "vendor/")):
        for entry in folder.iterdir():
            media = _media_type(entry.name)
            if entry.is_file() and media is not None:
                found[prefix + entry.name] = (entry.read_bytes(), media)
    return found


def router() -> APIRouter:
    files = assets()
    page = files["index.html"][0]
    api = APIRouter(include_in_schema=False)

    @api.get("/ui")
    @api.get("/ui/")
    async def dashboard() -> Response:
        return Response(page, media_type=_MEDIA_TYPES[".html"], headers=_HEADERS)

    @api.get("/ui/{name:path}")
    async def asset(name: str) -> Response:
        found = files.get(name)
        if found is None:
            raise errors.NotFound(f"the dashboard has no file {name!r}")
        content, media = found
        return Response(content, media_type=media, headers=_HEADERS)

    @api.get("/docs")
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="devplace - Swagger UI",
            swagger_js_url=SWAGGER_JS,
            swagger_css_url=SWAGGER_CSS,
            swagger_favicon_url=FAVICON,
        )

    return api
