"""What the platform's server-rendered pages share (the worklist, the journal's runs UI).

No framework and no build step: ``string.Template`` files, escaped values, a stylesheet, at
most a little JavaScript from the same origin. Security is the same for every page:

- ``SecurityHeaders`` (ASGI middleware): ``nosniff``, ``Referrer-Policy: same-origin``, no
  framing, and on the pages a strict CSP (scripts, styles, forms from this origin only; the
  pages have no inline script or style). API paths get only the part that matters for them.
- A sign-in token lives in an HttpOnly, SameSite=Strict cookie (``Session``), so page scripts
  cannot read it and other sites cannot post with it; every POST also checks ``Origin``
  against the deployment's public origin (behind a TLS-terminating ingress the request the
  app sees is plain HTTP on an inner host) or, without one, the request's own.
- A one-time message after a post/redirect/get travels in a flash cookie.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import html
import json
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from runplane.errors import ConfigError

__all__ = [
    "ASSETS",
    "ASSETS_PATH",
    "PAGE_CSP",
    "SecurityHeaders",
    "Session",
    "Templates",
    "e",
    "mount_assets",
    "page_html",
    "public_origin",
    "read_form",
    "signin_html",
    "when",
]

PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
# The API and its docs (Swagger UI's page runs an inline script) get the part that matters for
# them; the docs' files are the service's own (runplane.serving.apidocs).
_OTHER_CSP = "frame-ancestors 'none'"
API_PREFIXES = ("/api/", "/docs", "/redoc", "/openapi.json", "/metrics", "/healthz")
_COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    # Not no-referrer: under it browsers send "Origin: null" on form posts, which the
    # same-origin check (rightly) refuses. same-origin leaks nothing to other sites.
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]
_MAX_FORM = 64 * 1024
# The shared page shell, sign-in form and base stylesheet, served by every page's app here.
ASSETS = Path(__file__).parent / "assets"
ASSETS_PATH = "/_runplane"


_DEFAULT_PORTS = {"http": 80, "https": 443}


def public_origin(raw: str | None, name: str = "public origin") -> str | None:
    """``raw`` as a browser would send it in ``Origin`` (lowercase scheme and host, no default
    port, no trailing slash); ConfigError for anything that is not a bare http(s) origin."""
    if raw is None or not raw.strip():
        return None
    try:
        parts = urlsplit(raw.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{name}: {raw!r} is not a URL ({exc})") from exc
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in _DEFAULT_PORTS or not host:
        raise ConfigError(f"{name} must be http(s)://host[:port], got {raw!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ConfigError(f"{name} is an origin: no path, query or credentials, got {raw!r}")
    if ":" in host:
        host = f"[{host}]"  # IPv6 literal, as browsers write it
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}:{port}"
    return f"{scheme}://{host}"


class SecurityHeaders:
    """ASGI middleware: the security headers above on every HTTP response (headers the app
    set itself are left alone). ``pages``: path prefixes that get the page CSP when not
    everything outside ``API_PREFIXES`` is a page (the journal serves JSON at ``/runs``)."""

    def __init__(self, app: Any, pages: tuple[str, ...] | None = None) -> None:
        self.app = app
        self.pages = pages

    def _csp(self, path: str) -> str:
        if self.pages is not None:
            return PAGE_CSP if path.startswith(self.pages) else _OTHER_CSP
        return _OTHER_CSP if path.startswith(API_PREFIXES) else PAGE_CSP

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = self._csp(scope.get("path", ""))
        extra = [*_COMMON_HEADERS, (b"content-security-policy", csp.encode())]

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in extra if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Templates:
    """``string.Template`` files of one directory, read once."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._cache: dict[str, Template] = {}

    def __call__(self, name: str) -> Template:
        if name not in self._cache:
            self._cache[name] = Template((self._dir / name).read_text(encoding="utf-8"))
        return self._cache[name]


_shared = Templates(ASSETS)


def mount_assets(app: FastAPI) -> None:
    """Serve the shared stylesheet at ``ASSETS_PATH`` (every page links it first)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS), name="runplane-assets")


def page_html(
    *,
    title: str,
    product: str,
    home: str,
    stylesheet: str,
    who: str,
    flash: str,
    content: str,
    script: str = "",
) -> str:
    """A whole page: the shared shell around ``content`` (already escaped HTML)."""
    return _shared("base.html").substitute(
        title=e(title),
        product=e(product),
        home=e(home),
        assets=ASSETS_PATH,
        stylesheet=e(stylesheet),
        who=who,
        flash=flash,
        content=content,
        script=script,
    )


def signin_html(*, action: str, lede: str, error: str) -> str:
    """The sign-in card posting a token to ``action``; ``error`` is shown as an alert."""
    alert = f'<p class="flash flash-error" role="alert">{e(error)}</p>' if error else ""
    return _shared("signin.html").substitute(action=e(action), lede=e(lede), error=alert)


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def when(ms: int | None) -> str:
    if ms is None:
        return "—"
    stamp = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return f'<time datetime="{stamp.isoformat()}">{stamp:%Y-%m-%d %H:%M:%S} UTC</time>'


async def read_form(request: Request) -> dict[str, str]:
    """A urlencoded form body (first value per field); {} when oversized or malformed."""
    body = await request.body()
    if len(body) > _MAX_FORM:
        return {}
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {k: v[0] for k, v in parsed.items() if v}


@dataclass(frozen=True)
class Session:
    """The sign-in and flash cookies of one page (their names keep two pages on one host
    apart), and the origin checks every form post passes. ``path``: where the page lives."""

    token_cookie: str
    flash_cookie: str
    public_origin: str | None = None
    path: str = "/"

    def token(self, request: Request) -> str | None:
        return request.cookies.get(self.token_cookie)

    def same_origin(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return True  # not sent (older browsers, curl): the SameSite cookie still protects
        if self.public_origin is not None:
            # Behind a proxy the request's own scheme/host are the inner hop's, not the
            # address the browser used: the deployment says what that address is.
            return origin.rstrip("/").lower() == self.public_origin
        return origin == f"{request.url.scheme}://{request.url.netloc}"

    def secure(self, request: Request) -> bool:
        if self.public_origin is not None:
            return self.public_origin.startswith("https://")
        return request.url.scheme == "https"

    def signed_in(self, request: Request, token: str, to: str) -> RedirectResponse:
        response = RedirectResponse(to, status_code=303)
        response.set_cookie(
            self.token_cookie,
            token,
            path=self.path,
            httponly=True,
            samesite="strict",
            secure=self.secure(request),
        )
        return response

    def signed_out(self, to: str) -> RedirectResponse:
        response = RedirectResponse(to, status_code=303)
        response.delete_cookie(self.token_cookie, path=self.path)
        return response

    def back(self, to: str, kind: str, text: str) -> RedirectResponse:
        """Redirect to ``to`` with a one-time message (``kind``: ok or error)."""
        raw = json.dumps({"kind": kind, "text": text[:500]}).encode()
        response = RedirectResponse(to, status_code=303)
        response.set_cookie(
            self.flash_cookie,
            base64.urlsafe_b64encode(raw).decode(),
            path=self.path,
            httponly=True,
            samesite="strict",
        )
        return response

    def flash(self, request: Request) -> tuple[str, str] | None:
        raw = request.cookies.get(self.flash_cookie)
        if not raw:
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(raw.encode()))
            kind, text = str(data["kind"]), str(data["text"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        return ("ok" if kind == "ok" else "error"), text

    def consumed(self, response: HTMLResponse) -> None:
        """Clear the flash once a page has shown it."""
        response.delete_cookie(self.flash_cookie, path=self.path)
