"""Sign-in with the OpenID Provider (docs/sso.md): ``/login/sso`` starts the authorization code
flow, ``/login/sso/callback`` checks the provider's answer and starts a server-side session.

The callback runs the checks in the order OpenID Connect Core and RFC 9207 give them: the state
(good once, and only in the browser that started the sign-in), the provider's ``error``, the
``iss`` parameter, the code exchanged with the PKCE verifier, the ID token (app.domain.oidc),
then the role from the groups by the group mappings in effect (GPUPROV_OIDC_ROLES and those
admins stored; none: no access, and no session).
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse

from app.clock import utcnow
from app.domain import group_mappings, users
from app.domain.oidc import NoAccess, OpenIdProvider, SignInRefused, groups_of, role_of
from app.errors import NotFound, TooManyRequests
from app.http.dashboard.auth import _cookie_secure, _login_page, safe_next
from app.http.dashboard.sessions import PERSON_COOKIE, SESSION_COOKIE, SSO_LOGIN_COOKIE
from app.http.deps import DatabaseDep
from app.http.ratelimit import AuthFailureLimiter
from app.settings import Settings

log = logging.getLogger(__name__)

router = APIRouter()
_PATH = "/login/sso"


def _provider(request: Request) -> OpenIdProvider:
    provider: OpenIdProvider | None = request.app.state.oidc
    if provider is None:
        raise NotFound("single sign-on is not configured here (GPUPROV_OIDC_ISSUER)")
    return provider


@router.get(_PATH)
def start(
    request: Request,
    db: DatabaseDep,
    next: Annotated[
        str | None, Query(max_length=2048, description="local path to open after sign-in")
    ] = None,
) -> Response:
    """Send the browser to the provider's sign-in (303), remembering state, nonce and the PKCE
    verifier for the callback."""
    provider = _provider(request)
    _check_rate(request)
    next_url = safe_next(next)
    with db.transaction(write=True) as session:
        pending = users.start_login(session, next_url, utcnow())
    url = provider.authorization_url(pending.state, pending.nonce, pending.code_verifier)
    response = RedirectResponse(url, status_code=303)
    # Lax, not Strict: the callback is a navigation from the provider's site
    response.set_cookie(
        SSO_LOGIN_COOKIE,
        pending.browser,
        max_age=users.LOGIN_SECONDS,
        path=_PATH,
        httponly=True,
        samesite="lax",
        secure=_cookie_secure(request),
    )
    return response


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _check_rate(request: Request) -> None:
    """429 for a client that failed to sign in too often (the token login's limiter)."""
    limiter: AuthFailureLimiter = request.app.state.auth_limiter
    wait = limiter.retry_after(_client(request))
    if wait is not None:
        raise TooManyRequests(f"too many failed sign-ins from this client; retry in {wait} s", wait)


def _refused(request: Request, message: str, status: int, *, failed: bool = True) -> Response:
    if failed:
        # a refused answer counts against the client, as a wrong token does
        request.app.state.auth_limiter.fail(_client(request))
    response = _login_page(request, "/", error=message, status=status)
    response.delete_cookie(SSO_LOGIN_COOKIE, path=_PATH, httponly=True, samesite="lax")
    return response


@router.get(_PATH + "/callback")
def callback(
    request: Request,
    db: DatabaseDep,
    state: Annotated[str | None, Query(max_length=512)] = None,
    code: Annotated[str | None, Query(max_length=4096)] = None,
    iss: Annotated[str | None, Query(max_length=1024, description="RFC 9207")] = None,
    error: Annotated[str | None, Query(max_length=256)] = None,
    error_description: Annotated[str | None, Query(max_length=1024)] = None,
    error_uri: Annotated[str | None, Query(max_length=2048)] = None,
    session_state: Annotated[str | None, Query(max_length=1024)] = None,
) -> Response:
    """The provider's answer: a session and a 303 to the page asked for, or the login page
    saying why not."""
    provider = _provider(request)
    _check_rate(request)
    settings: Settings = request.app.state.settings
    now = utcnow()
    if not state:
        return _refused(request, "the provider's answer has no state: start again", 400)
    with db.transaction(write=True) as session:
        pending = users.take_login(session, state, request.cookies.get(SSO_LOGIN_COOKIE), now)
        found = (pending.nonce, pending.code_verifier, pending.next_url) if pending else None
    if found is None:
        # unknown, used before, expired, or started in another browser
        return _refused(request, "this sign-in has expired or was already used: start again", 400)
    nonce, verifier, next_url = found
    try:
        if error is not None:
            raise SignInRefused(f"the provider refused the sign-in: {error}", 403)
        provider.check_response_issuer(iss)
        if not code:
            raise SignInRefused("the provider's answer has no code", 400)
        id_token = provider.exchange(code, verifier)
        claims = provider.verify_id_token(id_token, nonce)
        with db.transaction() as session:
            mapping = group_mappings.effective(session, settings.oidc_roles)
        role = role_of(claims, settings.oidc_groups_claim, mapping)
    except NoAccess as e:
        with db.transaction(write=True) as session:
            users.refuse_access(session, provider.issuer, claims, now)
        log.info("sign-in without access: %s (%s)", claims.get("sub"), e.message)
        message = f"You have no access to gpuprov: {e.message}."
        return _refused(request, message, e.status, failed=False)
    except SignInRefused as e:
        log.info("sign-in refused: %s", e.message)
        return _refused(request, e.message, e.status)
    with db.transaction(write=True) as session:
        new = users.sign_in(
            session,
            provider.issuer,
            claims,
            role,
            id_token,
            now,
            settings.session_lifetime_seconds,
            replaces=request.cookies.get(PERSON_COOKIE),
            groups=groups_of(claims, settings.oidc_groups_claim),
        )
    log.info("dashboard sign-in: %s as %s", claims["sub"], role.value)
    response = RedirectResponse(next_url, status_code=303)
    secure = _cookie_secure(request)
    # Lax: the first page after the provider's redirect must see it (Strict would not)
    response.set_cookie(
        PERSON_COOKIE,
        new.cookie,
        max_age=settings.session_lifetime_seconds,
        path="/",
        httponly=True,
        samesite="lax",
        secure=secure,
    )
    response.delete_cookie(SSO_LOGIN_COOKIE, path=_PATH, httponly=True, samesite="lax")
    response.delete_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=secure
    )
    return response
