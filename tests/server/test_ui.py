"""The dashboard's routes (`server._ui`): the page and its files under /ui with the Content-Security-Policy, open
without a token when authentication is on; /docs loading Swagger UI from the package, not a CDN; and the files
shipped in the wheel. What the page does in a browser is tests/e2e/test_dashboard.py's."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from devplace.clocks import FakeClock
from devplace.server._app import create_app
from devplace.server._authn import Auth, Tokens
from devplace.server._ui import CSP, assets
from devplace.store import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "src" / "devplace" / "server" / "ui"
EXPECTED_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=create_app(memory_store, fleet_api=False))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


@pytest.fixture
async def guarded(clock: FakeClock) -> AsyncIterator[httpx2.AsyncClient]:
    store = MemoryStore(clock=clock)
    app = create_app(store, fleet_api=False, auth=Auth(Tokens.parse('admin-token,alice,1,"admin"\n')))
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://test") as client:
        yield client
    await store.close()


async def test_the_page_is_served_at_ui_with_the_content_security_policy(api: httpx2.AsyncClient) -> None:
    for path in ("/ui", "/ui/"):
        page = await api.get(path)
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"] == EXPECTED_CSP == CSP
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.text == (UI / "index.html").read_text()


async def test_the_page_has_no_inline_script_or_style_and_names_only_its_own_files(api: httpx2.AsyncClient) -> None:
    page = (await api.get("/ui")).text
    assert re.findall(r"<script[^>]*>", page) == ['<script type="module" src="/ui/app.js">']
    assert "<style" not in page
    assert "style=" not in page
    assert not re.findall(r"\son[a-z]+=", page)  # no inline event handlers
    for url in re.findall(r'(?:src|href)="([^"]+)"', page):
        assert url.startswith("/ui/"), url
        assert (await api.get(url)).status_code == 200, url


async def test_every_module_imports_only_modules_the_server_serves(api: httpx2.AsyncClient) -> None:
    for module in sorted(UI.glob("*.js")):
        for imported in re.findall(r'from "([^"]+)"', module.read_text()):
            assert imported.startswith("/ui/"), f"{module.name} imports {imported}"
            answer = await api.get(imported)
            assert answer.status_code == 200, imported
            assert answer.headers["content-type"] == "text/javascript; charset=utf-8"


async def test_no_module_writes_html_from_strings(api: httpx2.AsyncClient) -> None:
    for module in sorted(UI.glob("*.js")):
        source = "\n".join(line for line in module.read_text().splitlines() if not line.strip().startswith("//"))
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in source, f"{module.name} uses {sink}"


async def test_each_file_is_served_with_its_media_type_and_others_are_404(api: httpx2.AsyncClient) -> None:
    served = {
        "/ui/app.js": "text/javascript; charset=utf-8",
        "/ui/app.css": "text/css; charset=utf-8",
        "/ui/favicon.svg": "image/svg+xml",
        "/ui/vendor/swagger-ui-bundle.js": "text/javascript; charset=utf-8",
        "/ui/vendor/swagger-ui.css": "text/css; charset=utf-8",
        "/ui/vendor/LICENSE": "text/plain; charset=utf-8",
    }
    for path, media in served.items():
        answer = await api.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"] == media
        assert answer.headers["content-security-policy"] == CSP
    for missing in ("/ui/nothing.js", "/ui/../_ui.py", "/ui/vendor/../../_app.py", "/ui/%2e%2e/_ui.py"):
        answer = await api.get(missing)
        assert answer.status_code == 404, missing
        assert answer.json()["kind"] == "Status"


async def test_docs_loads_swagger_ui_from_the_package_not_a_cdn(api: httpx2.AsyncClient) -> None:
    docs = await api.get("/docs")
    assert docs.status_code == 200
    urls = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
    assert sorted(urls) == ["/ui/favicon.svg", "/ui/vendor/swagger-ui-bundle.js", "/ui/vendor/swagger-ui.css"]
    assert "http" not in docs.text.replace("'/openapi.json'", "")
    bundle = await api.get("/ui/vendor/swagger-ui-bundle.js")
    assert bundle.content == (UI / "vendor" / "swagger-ui-bundle.js").read_bytes()
    assert b"SwaggerUIBundle" in bundle.content
    assert (await api.get("/openapi.json")).status_code == 200


async def test_the_dashboard_routes_are_not_in_the_openapi_document(api: httpx2.AsyncClient) -> None:
    paths = (await api.get("/openapi.json")).json()["paths"]
    assert not [path for path in paths if path.startswith(("/ui", "/docs"))]


async def test_with_authentication_on_the_files_need_no_token_but_the_data_does(
    guarded: httpx2.AsyncClient,
) -> None:
    for path in ("/ui", "/ui/app.js", "/ui/vendor/swagger-ui-bundle.js"):
        assert (await guarded.get(path)).status_code == 200, path
    assert (await guarded.get("/api/v1/nodes")).status_code == 401
    assert (await guarded.post("/ui", content=b"{}")).status_code == 405
    bearer = {"Authorization": "Bearer admin-token"}
    assert (await guarded.get("/api/v1/nodes", headers=bearer)).status_code == 200


def test_the_wheel_ships_every_file_of_the_dashboard() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["devplace"]
    package = ROOT / "src" / "devplace"
    files = sorted(p.relative_to(package).as_posix() for p in UI.rglob("*") if p.is_file())
    assert "server/ui/index.html" in files
    assert "server/ui/vendor/swagger-ui-bundle.js" in files
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), f"{name} is not package data"
    served = {f"server/ui/{path}" for path in assets()}
    assert served == set(files)
