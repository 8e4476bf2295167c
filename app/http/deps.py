"""`Annotated` dependencies that keep endpoints short: sessions, the caller, scope checks.

Dependencies that do no I/O are ``async`` so FastAPI runs them inline instead of handing each
to the thread pool; the ones that touch the database are plain functions (run in the pool).

Sessions commit when the endpoint returns and roll back when it raises (``scope="function"``
runs that before the response is sent, so a failed commit is never answered with success).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.clock import utcnow
from app.domain.ci_claims import CiTrustRule, build_rule
from app.domain.ci_tokens import IssuerKeys, looks_like_jwt, verify_ci_token
from app.domain.policies import writer_refusal
from app.domain.provenance import CatalogCache
from app.domain.tokens import Principal, Scope, authenticate, record_use, use_is_due
from app.errors import AppError, Forbidden, TooManyRequests, Unauthorized
from app.http.errors import safe_description
from app.http.metrics import Metrics
from app.http.params import after_authentication, check_query
from app.http.ratelimit import AuthFailureLimiter
from app.settings import Settings
from app.storage.repositories import ci_trust
from app.storage.session import Database

log = logging.getLogger(__name__)


async def get_db(request: Request) -> Database:
    """The process's database, created by the lifespan."""
    db: Database = request.app.state.db
    return db


async def get_catalogs(request: Request) -> CatalogCache:
    """The process's copy of the trusted reference catalogs."""
    catalogs: CatalogCache = request.app.state.catalogs
    return catalogs


async def get_settings(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


DatabaseDep = Annotated[Database, Depends(get_db)]
CatalogsDep = Annotated[CatalogCache, Depends(get_catalogs)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


def _unit_of_work(db: Database, *, write: bool) -> Iterator[Session]:
    session = db.session(write=write)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def read_session(db: DatabaseDep) -> Iterator[Session]:
    """A request-scoped session for queries."""
    yield from _unit_of_work(db, write=False)


def write_session(db: DatabaseDep) -> Iterator[Session]:
    """A request-scoped session whose transaction takes the write lock up front on SQLite."""
    yield from _unit_of_work(db, write=True)


SessionDep = Annotated[Session, Depends(read_session, scope="function")]
WriteSessionDep = Annotated[Session, Depends(write_session, scope="function")]

_bearer = HTTPBearer(auto_error=False, description="API token (`gpuprov token create`)")


def current_principal(
    request: Request,
    db: DatabaseDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller of the request, from its bearer token (401 without a valid one; 429 once the
    client has failed authentication too often: `app.http.ratelimit`)."""
    metrics: Metrics = request.app.state.metrics
    if credentials is None or not credentials.credentials:
        metrics.auth_failures.labels("missing").inc()
        raise Unauthorized()
    return authenticate_secret(request, db, credentials.credentials)


def authenticate_secret(request: Request, db: Database, secret: str) -> Principal:
    """The principal of a token secret, its last use recorded when due: the API's bearer token
    and the dashboard's login form (`Unauthorized` for an unknown, revoked or expired token,
    `TooManyRequests` once the client has failed too often)."""
    metrics: Metrics = request.app.state.metrics
    limiter: AuthFailureLimiter = request.app.state.auth_limiter
    client = request.client.host if request.client else "unknown"
    wait = limiter.retry_after(client)
    if wait is not None:
        metrics.auth_failures.labels("rate_limited").inc()
        raise TooManyRequests(
            f"too many failed authentications from this client; retry in {wait} s", wait
        )
    now = utcnow()
    try:
        if looks_like_jwt(secret):
            raise Unauthorized(
                "a CI provider's ID token is accepted only by POST /api/v1/gate and "
                "POST /api/v1/reports",
                reason="invalid",
            )
        with db.lookup() as conn:
            teamless = request.app.state.settings.teamless_access
            principal = authenticate(conn, secret, now, teamless)
    except Unauthorized as e:
        limiter.fail(client)
        metrics.auth_failures.labels(e.reason).inc()
        raise
    if use_is_due(principal, now):
        try:
            with db.transaction(write=True) as session:
                record_use(session, principal, now)
        except SQLAlchemyError as e:  # bookkeeping only: never fail a request over it
            log.warning(
                "could not record the use of token %s: %s", principal.token_id, safe_description(e)
            )
    return principal


CurrentToken = Annotated[Principal, Depends(current_principal)]


def _stored_rules(db: Database, settings: Settings, issuer: str) -> list[CiTrustRule]:
    # checked again at use: a rule stored under another GPUPROV_CI_AUDIENCE, or edited behind
    # the service's back into something the API refuses, grants nothing
    rules = []
    with db.lookup() as conn:
        documents = ci_trust.rules_of(conn, issuer)
    for document in documents:
        body = {k: v for k, v in document.items() if k != "name"}
        try:
            rules.append(
                build_rule(
                    str(document.get("name")),
                    body,
                    audience=settings.ci_audience,
                    allow_loopback=settings.allow_loopback_issuers,
                )
            )
        except AppError as e:
            log.warning("CI trust rule %r is not used: %s", document.get("name"), e)
    return rules


def ci_or_token_principal(
    request: Request,
    db: DatabaseDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """The caller of a gate or report request: a stored token, or a CI job by its provider's
    OIDC ID token under a CI trust rule (docs/ci.md)."""
    metrics: Metrics = request.app.state.metrics
    if credentials is None or not credentials.credentials:
        metrics.auth_failures.labels("missing").inc()
        raise Unauthorized()
    secret = credentials.credentials
    if not looks_like_jwt(secret):
        return authenticate_secret(request, db, secret)
    limiter: AuthFailureLimiter = request.app.state.auth_limiter
    client = request.client.host if request.client else "unknown"
    wait = limiter.retry_after(client)
    if wait is not None:
        metrics.auth_failures.labels("rate_limited").inc()
        raise TooManyRequests(
            f"too many failed authentications from this client; retry in {wait} s", wait
        )
    settings: Settings = request.app.state.settings
    keys: IssuerKeys = request.app.state.issuer_keys
    try:
        grant = verify_ci_token(
            secret, lambda issuer: _stored_rules(db, settings, issuer), keys, settings.ci_audience
        )
    except Unauthorized as e:
        limiter.fail(client)
        metrics.auth_failures.labels(e.reason).inc()
        raise
    request.state.ci_grant = grant
    return grant.principal


CallerDep = Annotated[Principal, Depends(ci_or_token_principal)]


def _check_scopes(security_scopes: SecurityScopes, principal: Principal, request: Request) -> None:
    for scope in security_scopes.scopes:
        if not principal.has(Scope(scope)):
            request.app.state.metrics.auth_failures.labels("scope").inc()
            raise Forbidden(f"this endpoint needs a token with the {scope} scope")
    check_query(request)  # 401 and 403 come before a 400 about the query


@after_authentication
async def _require_scopes(
    security_scopes: SecurityScopes, principal: CurrentToken, request: Request
) -> Principal:
    _check_scopes(security_scopes, principal, request)
    return principal


@after_authentication
async def _require_scopes_of_caller(
    security_scopes: SecurityScopes, principal: CallerDep, request: Request
) -> Principal:
    _check_scopes(security_scopes, principal, request)
    return principal


@after_authentication
async def _require_policy_writer(
    security_scopes: SecurityScopes, principal: CurrentToken, request: Request
) -> Principal:
    # policy:write and no team: the 403 says which is missing (app.domain.policies.check_writer)
    why = writer_refusal(principal)
    if why is not None:
        request.app.state.metrics.auth_failures.labels("scope").inc()
        raise Forbidden(why)
    check_query(request)
    return principal


def scoped(scope: Scope) -> Any:
    """A dependency admitting callers that hold ``scope``; the OpenAPI document lists it in
    the operation's security requirement."""
    return Security(_require_scopes, scopes=[scope.value])


def ci_scoped(scope: Scope) -> Any:
    """As `scoped`, also admitting a CI job's OIDC ID token (the gate and report pushes)."""
    return Security(_require_scopes_of_caller, scopes=[scope.value])


ReportWriter = Annotated[Principal, ci_scoped(Scope.REPORT_WRITE)]
InventoryReader = Annotated[Principal, scoped(Scope.INVENTORY_READ)]
Admin = Annotated[Principal, scoped(Scope.ADMIN)]
Triager = Annotated[Principal, scoped(Scope.TRIAGE)]
#: a caller that may store promotion policies: policy:write (or admin) and in no team
PolicyWriter = Annotated[
    Principal, Security(_require_policy_writer, scopes=[Scope.POLICY_WRITE.value])
]
