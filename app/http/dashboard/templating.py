"""Jinja2 rendering for the dashboard: autoescaping on for every template (report values are
untrusted), undefined names are errors, and the URL helpers templates use to keep a page's
filters in its links.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from app.http.dashboard.paging import url_with
from app.http.dashboard.publisher_html import publisher_html
from scanner.wording import counted, plural

#: the pages' policy: their stylesheet and nothing else, no inline script or style, no framing
#: (the service's other answers get the stricter API policy of `app.http.security`)
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "font-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY}

_env = Environment(
    loader=PackageLoader("app.http.dashboard", "templates"),
    # every template, whatever its name: a report's strings are never trusted
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(value: str | datetime | None) -> str:
    """An ISO timestamp shortened to the minute, in UTC."""
    if value is None:
        return "—"
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return text[:16].replace("T", " ")


def _breakable(value: object, after: str = "/") -> Markup:
    """A path or name that may wrap after each ``after`` character (escaped, a ``<wbr>`` after
    each): a column of paths stays readable instead of breaking every few characters."""
    if value is None:
        return Markup("—")
    return Markup(f"{escape(after)}<wbr>").join(escape(part) for part in str(value).split(after))


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "—"


@dataclass(frozen=True, slots=True)
class NavItem:
    """One entry of the navigation bar."""

    path: str
    label: str
    admin: bool = False

    def active(self, request_path: str) -> bool:
        """Whether the page shown is this entry's (or one below it)."""
        if self.path == "/":
            return request_path == "/"
        return request_path == self.path or request_path.startswith(self.path + "/")


#: the navigation bar; each page module's path, in reading order
NAV = [
    NavItem("/", "Overview"),
    NavItem("/assets", "Assets"),
    NavItem("/libraries", "Libraries"),
    NavItem("/drift", "Drift"),
    NavItem("/advisories", "Advisories"),
    NavItem("/compliance", "Compliance"),
    NavItem("/decisions", "Gate decisions"),
    NavItem("/policies", "Policies"),
    NavItem("/admin", "Admin", admin=True),
]

_env.filters["when"] = _when
# {{ n|counted("asset") }} -> "1 asset"; {{ "file"|plural(n) }} -> "file" or "files"
_env.filters["counted"] = counted
_env.filters["plural"] = plural
_env.filters["breakable"] = _breakable
# a publisher's advisory notes: allow-listed HTML (publisher_html.py), never the text as given
_env.filters["publisher_html"] = publisher_html
_env.globals["percent"] = _percent
_env.globals["nav"] = NAV


def render(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    at: str | None = None,
) -> HTMLResponse:
    """Render ``template`` with ``context`` plus the request's page state (user, CSRF token,
    a URL builder that keeps the query string). ``at``: the URL of the page shown when it is
    not the request's (a refused form shows its page again: its links are that page's)."""
    page = getattr(request.state, "page", None)
    if at is None:
        path, query = request.url.path, request.query_params.multi_items()
    else:
        parts = urlsplit(at)
        path, query = parts.path, parse_qsl(parts.query)

    def here(**changes: Any) -> str:
        return url_with(path, query, **changes)

    html = _env.get_template(template).render(
        {
            "request_path": path,
            "user": getattr(page, "user", None),
            "csrf_token": getattr(page, "csrf", ""),
            "role": getattr(page, "role", None),
            "url_with": here,
            **context,
        }
    )
    return HTMLResponse(html, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})
