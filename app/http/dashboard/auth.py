"""Who is looking at a page: the session dependency (redirect to the login form without one),
scope checks (``inventory:read`` for pages, ``triage`` for the triage forms, ``admin`` for admin
actions, policy writers for the policy form), the CSRF check of every posted form, and the
``/login`` and ``/logout`` pages.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from app.clock import utcnow
from app.domain import audit, group_mappings, users
from app.domain.policies import check_writer
from app.domain.tokens import (
    Principal,
    Scope,
    SessionEnd,
    hash_secret,
    session_end,
    session_principal,
)
from app.errors import BadRequest, Forbidden, Unauthorized, UnsupportedMediaType
from app.http.body import read_body
from app.http.dashboard.paging import query_string
from app.http.dashboard.sessions import (
    LOGIN_COOKIE,
    PERSON_COOKIE,
    SESSION_COOKIE,
    Signer,
    same_token,
)
from app.http.dashboard.templating import render
from app.http.deps import DatabaseDep, authenticate_secret
from app.http.params import after_authentication, check_query
from app.settings import Settings
from scanner.wording import counted

log = logging.getLogger(__name__)

#: largest form body a dashboard page accepts (the biggest, a policy document, fits)
MAX_FORM_BYTES = 1024 * 1024
#: largest login form (a token, its CSRF token and a `next` path of 2,048 characters, encoded):
#: the one form read before anyone is known, so the smallest
MAX_LOGIN_FORM_BYTES = 16 * 1024
#: seconds a login form stays valid
LOGIN_FORM_SECONDS = 3600
_FORM_TYPE = "application/x-www-form-urlencoded"


class LoginRequired(Exception):
    """No valid session: the page answers with a redirect to the login form, which says why a
    session that existed ended."""

    def __init__(
        self, next_url: str, ended: SessionEnd | None = None, *, provider: bool = False
    ) -> None:
        super().__init__(next_url)
        self.next_url = next_url
        self.ended = ended
        #: a signed-in person's session is due for the provider's word again: sign in there
        self.provider = provider


@dataclass(frozen=True, slots=True)
class PageState:
    """The logged-in user of a page request and its session's CSRF token."""

    user: Principal
    csrf: str
    #: a signed-in person's role (None for a token's session)
    role: str | None = None

    @property
    def is_admin(self) -> bool:
        return Scope.ADMIN.value in self.user.scopes

    @property
    def may_triage(self) -> bool:
        """Whether the user holds ``triage`` (analysts, admins): the triage forms are shown."""
        return self.user.has(Scope.TRIAGE)

    @property
    def actor(self) -> audit.Actor:
        """The signed-in user as the audit log names them (a form's action is ``web``)."""
        if self.user.person is not None:
            return self.user.actor  # the person signed in with the OpenID Provider
        return audit.web_actor(self.user.name, self.user.token_id)


def signer_of(request: Request) -> Signer:
    """The app's cookie signer (made once from ``GPUPROV_SECRET_KEY``)."""
    signer: Signer = request.app.state.dashboard_signer
    return signer


def _now() -> int:
    return int(utcnow().timestamp())


def safe_next(value: str | None) -> str:
    """A ``next`` target that stays on this site: a local absolute path (400 otherwise)."""
    if not value:
        return "/"
    parts = urlsplit(value)
    local = (
        value.startswith("/")
        and not value.startswith("//")
        and "\\" not in value
        and not parts.scheme
        and not parts.netloc
        and value.isprintable()
        and len(value) <= 2048
    )
    if not local:
        raise BadRequest("next must be a local path such as /assets")
    # the login pages themselves are no destination (/login/sso would sign in again, in a loop)
    if parts.path in ("/login", "/logout") or parts.path.startswith("/login/"):
        return "/"
    return value


def _here(request: Request) -> str:
    if request.method != "GET":
        return "/"
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def page_state(request: Request, db: DatabaseDep) -> PageState:
    """The page's logged-in user, from the session cookie (a redirect to /login without a
    valid one: missing, forged, expired, or its token revoked or expired; the last three say
    so there)."""
    settings: Settings = request.app.state.settings
    now = utcnow()
    person_cookie = request.cookies.get(PERSON_COOKIE)
    if person_cookie and settings.oidc_enabled:
        with db.transaction() as session:
            # the group mappings in effect now: a mapping removed ends its access at this page
            mapping = group_mappings.effective(session, settings.oidc_roles)
            person = users.session_of(
                session, person_cookie, now, mapping, settings.teamless_access
            )
            gone = None
            if person is None:
                gone = users.session_end(session, person_cookie, now, mapping)
        if gone is not None and not request.cookies.get(SESSION_COOKIE):
            # a person's sign-in that ended: the login page says why (no token session to try)
            raise LoginRequired(_here(request), gone)
        if person is not None:
            if (now - person.verified_at).total_seconds() >= settings.oidc_refresh_seconds:
                # the groups are read again from the provider: a removed group ends access
                raise LoginRequired(_here(request), provider=True)
            state = PageState(person.principal, person.csrf, person.role.value)
            request.state.page = state
            return state
    if not settings.token_login:
        raise LoginRequired(_here(request))
    signer = signer_of(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    data = signer.session(cookie, int(now.timestamp()))
    if data is None:
        outlived = signer.outlived(cookie, int(now.timestamp()))
        raise LoginRequired(_here(request), SessionEnd.SESSION_EXPIRED if outlived else None)
    with db.lookup() as conn:
        found = session_principal(conn, data.token_id, now, settings.teamless_access)
        ended = session_end(conn, data.token_id, now) if found is None else None
    if found is None or not same_token(signer.binding(found[1]), data.binding):
        # a binding to another hash: the token this session logged in with is gone
        raise LoginRequired(_here(request), ended or SessionEnd.TOKEN_REVOKED)
    state = PageState(found[0], data.csrf)
    request.state.page = state
    return state


def _require(scope: Scope, state: PageState) -> PageState:
    if not state.user.has(scope):
        raise Forbidden(f"this page needs a token with the {scope.value} scope")
    return state


@after_authentication
async def user(request: Request, state: Annotated[PageState, Depends(page_state)]) -> PageState:
    """A logged-in user, whatever their scopes (then the query string's rules)."""
    check_query(request)
    return state


@after_authentication
async def reader(request: Request, state: Annotated[PageState, Depends(page_state)]) -> PageState:
    """A logged-in user who may read the inventory (then the query string's rules)."""
    _require(Scope.INVENTORY_READ, state)
    check_query(request)
    return state


@after_authentication
async def admin(request: Request, state: Annotated[PageState, Depends(page_state)]) -> PageState:
    """A logged-in user holding the admin scope (then the query string's rules)."""
    _require(Scope.ADMIN, state)
    check_query(request)
    return state


@after_authentication
async def policy_writer(
    request: Request, state: Annotated[PageState, Depends(page_state)]
) -> PageState:
    """A logged-in user who may store promotion policies (admins, analysts in no team): 403
    saying why for the others (then the query string's rules)."""
    check_writer(state.user)
    check_query(request)
    return state


@after_authentication
async def triager(request: Request, state: Annotated[PageState, Depends(page_state)]) -> PageState:
    """A logged-in user holding the triage scope (then the query string's rules)."""
    _require(Scope.TRIAGE, state)
    check_query(request)
    return state


Reader = Annotated[PageState, Depends(reader)]
PolicyWriterUser = Annotated[PageState, Depends(policy_writer)]
AdminUser = Annotated[PageState, Depends(admin)]
TriageUser = Annotated[PageState, Depends(triager)]


async def read_form(request: Request, limit: int = MAX_FORM_BYTES) -> dict[str, str]:
    """An url-encoded form body of at most `limit` bytes as a dict (the last value of a
    repeated field wins); read it once the session is checked (the login form aside)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != _FORM_TYPE:
        raise UnsupportedMediaType(f"forms are posted as {_FORM_TYPE}")
    body = await read_body(request, limit, "the form")
    try:
        pairs = parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=200)
    except (UnicodeDecodeError, ValueError) as e:
        raise BadRequest("the form is not valid url-encoded UTF-8") from e
    if any("\x00" in k or "\x00" in v for k, v in pairs):
        raise BadRequest("the form holds a NUL character")
    return dict(pairs)


CSRF_REFUSED = (
    "The form was refused: its CSRF token is missing or does not match this session. "
    "Reload the page and submit it again."
)


async def checked_form(request: Request, state: PageState) -> dict[str, str]:
    """A posted form whose ``csrf_token`` field matches the session's (403 otherwise)."""
    form = await read_form(request)
    if not same_token(state.csrf, form.get("csrf_token")):
        raise Forbidden(CSRF_REFUSED)
    return form


router = APIRouter()


def _cookie_secure(request: Request) -> bool:
    settings: Settings = request.app.state.settings
    return settings.cookie_secure or request.url.scheme == "https"


def ended_message(ended: SessionEnd, session_seconds: int) -> str:
    """What the login page says about a session that ended (the token's words are the API's:
    "unknown or revoked" and "expired", nothing more)."""
    if ended is SessionEnd.SESSION_EXPIRED:
        if session_seconds % 3600 == 0:
            length = counted(session_seconds // 3600, "hour")
        elif session_seconds % 60 == 0:
            length = counted(session_seconds // 60, "minute")
        else:
            length = counted(session_seconds, "second")
        return (
            f"Your session ended: a session lasts {length} (GPUPROV_SESSION_LIFETIME_SECONDS). "
            "Log in again."
        )
    if ended is SessionEnd.TOKEN_EXPIRED:
        return "Your session ended: the token has expired. Log in with a current token."
    if ended is SessionEnd.TOKEN_REVOKED:
        return "Your session ended: the token is unknown or revoked. Log in with a current token."
    if ended is SessionEnd.SESSION_ENDED:
        return (
            "Your session ended: it was signed out, or replaced by a newer sign-in. Sign in again."
        )
    if ended is SessionEnd.ACCESS_REMOVED:
        return (
            "Your session ended: your groups at the identity provider no longer give you a role "
            "in gpuprov. Ask an administrator for access."
        )
    return "You have logged out."


def _login_page(
    request: Request,
    next_url: str,
    *,
    error: str | None = None,
    status: int = 200,
    notice: str | None = None,
) -> Response:
    settings: Settings = request.app.state.settings
    token, cookie = signer_of(request).new_login(_now())
    context = {
        "login_csrf": token,
        "next": next_url,
        "error": error,
        "notice": notice,
        "token_login": settings.token_login,
        "provider_name": settings.oidc_provider_name if settings.oidc_enabled else None,
        "sso_url": "/login/sso"
        + (f"?{query_string({'next': next_url})}" if next_url != "/" else ""),
    }
    response = render(request, "login.html", context, status=status)
    response.set_cookie(
        LOGIN_COOKIE,
        cookie,
        max_age=LOGIN_FORM_SECONDS,
        path="/login",
        httponly=True,
        samesite="strict",
        secure=_cookie_secure(request),
    )
    return response


@router.get("/login")
def login_form(
    request: Request,
    next: Annotated[
        str | None, Query(max_length=2048, description="local path to open after login")
    ] = None,
    ended: Annotated[
        SessionEnd | None, Query(description="why the session before ended (the page says so)")
    ] = None,
) -> Response:
    """The login form: a service token in the field ``token``."""
    settings: Settings = request.app.state.settings
    notice = None
    if ended is not None:
        notice = ended_message(ended, settings.session_lifetime_seconds)
    return _login_page(request, safe_next(next), notice=notice)


@router.post("/login")
async def login(request: Request, db: DatabaseDep) -> Response:
    """Check the token and start a session (303 to ``next``)."""
    settings: Settings = request.app.state.settings
    if not settings.token_login:
        raise Forbidden(
            "token login is switched off here (GPUPROV_TOKEN_LOGIN=0): sign in with "
            f"{settings.oidc_provider_name}"
        )
    form = await read_form(request, MAX_LOGIN_FORM_BYTES)
    next_url = safe_next(form.get("next"))
    signer = signer_of(request)
    expected = signer.login_token(request.cookies.get(LOGIN_COOKIE), _now(), LOGIN_FORM_SECONDS)
    if expected is None or not same_token(expected, form.get("csrf_token")):
        raise Forbidden(CSRF_REFUSED)
    secret = form.get("token", "").strip()
    if not secret:
        return _login_page(request, next_url, error="enter a service token", status=400)
    try:
        principal = await run_in_threadpool(authenticate_secret, request, db, secret)
    except Unauthorized as e:
        # the API's own words for this secret: an expired token is said to be expired, an
        # unknown and a revoked one read the same
        log.info("dashboard login refused: %s", e.message)
        return _login_page(request, next_url, error=e.message, status=401)
    if not principal.has(Scope.INVENTORY_READ):
        return _login_page(
            request,
            next_url,
            error="this token has neither the inventory:read nor the admin scope",
            status=403,
        )
    lifetime = settings.session_lifetime_seconds
    assert principal.token_id is not None  # the login form takes stored tokens only
    cookie = signer.new_session(principal.token_id, hash_secret(secret), _now(), lifetime)
    log.info("dashboard login: token %s (%s)", principal.token_id, principal.name)
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=lifetime,
        path="/",
        httponly=True,
        samesite="strict",
        secure=_cookie_secure(request),
    )
    secure = _cookie_secure(request)
    response.delete_cookie(
        LOGIN_COOKIE, path="/login", httponly=True, samesite="strict", secure=secure
    )
    return response


@router.post("/logout")
async def logout(
    request: Request, db: DatabaseDep, state: Annotated[PageState, Depends(user)]
) -> Response:
    """End the session (the form carries the CSRF token) and go back to the login form; a
    signed-in person's session row is deleted, and they are signed out at the provider too
    where it offers RP-initiated logout."""
    await checked_form(request, state)
    secure = _cookie_secure(request)
    ended = f"/login?ended={SessionEnd.LOGGED_OUT}"
    response: Response = RedirectResponse(ended, status_code=303)
    if state.user.person is not None:
        cookie = request.cookies.get(PERSON_COOKIE)

        def end() -> str | None:
            with db.transaction(write=True) as session:
                return users.end_session(session, cookie)[1]

        id_token = await run_in_threadpool(end)
        provider = request.app.state.oidc
        after = provider_login_url(request)
        url = await run_in_threadpool(provider.end_session_url, id_token, after)
        if url is not None:
            # a page that moves on by itself: the pages' CSP (form-action 'self') would stop a
            # redirect of this form's answer to another site
            response = render(request, "logged_out.html", {"end_session_url": url})
        log.info("dashboard logout: %s", state.user.name)
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=secure
    )
    response.delete_cookie(PERSON_COOKIE, path="/", httponly=True, samesite="lax", secure=secure)
    return response


def provider_login_url(request: Request) -> str:
    """The login page's absolute URL on the redirect URL's origin (the provider sends people
    back there after logging out: register it as a post-logout redirect URI)."""
    settings: Settings = request.app.state.settings
    parts = urlsplit(settings.oidc_redirect_url or "")
    return f"{parts.scheme}://{parts.netloc}/login"
