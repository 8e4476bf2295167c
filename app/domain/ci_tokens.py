"""Keyless CI: a CI provider's OIDC ID token checked against its issuer's keys and the trust
rules (app.domain.ci_claims), giving the job a `Principal` with the rule's rights.

Only issuers some rule names are ever contacted (a token naming any other issuer is refused
before anything is fetched). Keys come from OpenID discovery (``{issuer}/.well-known/
openid-configuration`` → ``jwks_uri``), over HTTPS, without proxies or redirects, cached and
fetched again when a token names an unknown ``kid`` (at most once per `REFRESH_INTERVAL`);
or from a configured JWKS file for installs that cannot reach the issuer.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
from sqlalchemy.orm import Session

from app.domain.ci_claims import CiTrustRule, check_issuer, first_match, recorded_claims
from app.domain.tokens import Principal
from app.errors import BadRequest, ServiceUnavailable, Unauthorized
from app.storage.repositories import ci_trust

#: the signature algorithms a CI token may use: asymmetric only (no ``none``, and no HMAC,
#: whose "key" would be the issuer's public key: the algorithm confusion attack)
ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
#: clock skew allowed on ``exp``, ``iat`` and ``nbf`` (seconds)
LEEWAY = 60
#: the longest lifetime (``exp`` − ``iat``) of an accepted token: CI providers issue minutes
MAX_LIFETIME = 24 * 3600
#: how long fetched keys are reused before discovery runs again (seconds)
KEYS_TTL = 600
#: the shortest interval between two fetches for one issuer when a token names an unknown kid
REFRESH_INTERVAL = 30
#: largest discovery document or JWKS read (bytes)
MAX_DOCUMENT_BYTES = 256 * 1024
_TIMEOUT = httpx.Timeout(5.0)


def looks_like_jwt(secret: str) -> bool:
    """Whether a bearer secret has a JWS compact form (stored tokens never do)."""
    return secret.startswith("eyJ") and secret.count(".") == 2


@dataclass(slots=True)
class _Keys:
    keys: dict[str | None, jwt.PyJWK]
    fetched: float


class IssuerKeys:
    """Each trusted issuer's signing keys, cached per process."""

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        jwks_files: Mapping[str, Path] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._allow_loopback = allow_loopback
        self._files = dict(jwks_files or {})
        self._transport = transport
        self._cache: dict[str, _Keys] = {}
        self._lock = threading.Lock()

    def key(self, issuer: str, kid: str | None) -> jwt.PyJWK:
        """The issuer's key `kid` (a token without ``kid`` only when the issuer has one key)."""
        with self._lock:
            cached = self._cache.get(issuer)
        now = time.monotonic()
        if cached is None or now - cached.fetched > KEYS_TTL:
            cached = self._refresh(issuer)
        elif kid not in cached.keys and now - cached.fetched > REFRESH_INTERVAL:
            cached = self._refresh(issuer)  # the issuer may have rotated its keys
        if kid is None and len(cached.keys) == 1:
            return next(iter(cached.keys.values()))
        found = cached.keys.get(kid)
        if found is None:
            raise Unauthorized(
                f"the CI token's key {str(kid)[:80]!r} is not one of {issuer}'s keys",
                reason="invalid",
            )
        return found

    def _refresh(self, issuer: str) -> _Keys:
        document = self._jwks(issuer)
        keys: dict[str | None, jwt.PyJWK] = {}
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise ServiceUnavailable(f"the JWKS of {issuer} holds no 'keys' list", 30)
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key of a type this service does not use (or a malformed one)
            if key.algorithm_name not in ALGORITHMS:
                continue
            kid = entry.get("kid")
            keys[kid if isinstance(kid, str) else None] = key
        fresh = _Keys(keys, time.monotonic())
        with self._lock:
            self._cache[issuer] = fresh
        return fresh

    def _jwks(self, issuer: str) -> dict[str, Any]:
        path = self._files.get(issuer)
        if path is not None:
            try:
                return _json_object(path.read_bytes()[: MAX_DOCUMENT_BYTES + 1], str(path))
            except OSError as e:
                raise ServiceUnavailable(
                    f"cannot read the JWKS file {path}: {e.strerror}", 30
                ) from None
        discovery_url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        discovery = self._get(discovery_url)
        if discovery.get("issuer") != issuer:
            # OpenID Connect Discovery §4.3: a document for another issuer is not this one's
            raise ServiceUnavailable(
                f"the discovery document of {issuer} names issuer "
                f"{str(discovery.get('issuer'))[:200]!r}",
                30,
            )
        jwks_uri = discovery.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ServiceUnavailable(f"the discovery document of {issuer} has no jwks_uri", 30)
        try:
            check_issuer(jwks_uri, allow_loopback=self._allow_loopback)
        except BadRequest as e:
            raise ServiceUnavailable(f"the jwks_uri of {issuer}: {e}", 30) from None
        return self._get(jwks_uri)

    def _get(self, url: str) -> dict[str, Any]:
        try:
            # no proxies from the environment, no redirects: the address asked is the one used
            with httpx.Client(
                timeout=_TIMEOUT, follow_redirects=False, trust_env=False, transport=self._transport
            ) as client:
                with client.stream("GET", url, headers={"Accept": "application/json"}) as answer:
                    if answer.status_code != 200:
                        raise ServiceUnavailable(
                            f"{url} answered {answer.status_code}; the CI token cannot be checked",
                            30,
                        )
                    body = b""
                    for chunk in answer.iter_bytes():
                        body += chunk
                        if len(body) > MAX_DOCUMENT_BYTES:
                            break
        except httpx.HTTPError as e:
            raise ServiceUnavailable(
                f"cannot reach {url} to check the CI token: {type(e).__name__}", 30
            ) from None
        return _json_object(body, url)


def _json_object(body: bytes, where: str) -> dict[str, Any]:
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ServiceUnavailable(f"{where} is larger than {MAX_DOCUMENT_BYTES} bytes", 30)
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ServiceUnavailable(f"{where} is not JSON", 30) from None
    if not isinstance(document, dict):
        raise ServiceUnavailable(f"{where} is not a JSON object", 30)
    return document


def _refused(message: str) -> Unauthorized:
    return Unauthorized(message, reason="invalid")


def use_key(issuer: str, claims: Mapping[str, Any]) -> str:
    """What a token's use is remembered by: its issuer and ``jti``."""
    return hashlib.sha256(f"{issuer}\0{claims['jti']}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class CiGrant:
    """A checked CI token: the principal it acts as, and what its use is remembered by."""

    principal: Principal
    use_key: str
    expires_at: datetime


def verify_ci_token(
    token: str,
    rules_for: Callable[[str], Sequence[CiTrustRule]],
    keys: IssuerKeys,
    audience: str | None,
) -> CiGrant:
    """The grant of a CI ID token, or `Unauthorized` naming what failed (never which rule or
    secret would have matched)."""
    if audience is None:
        raise _refused("keyless CI is not configured on this service (GPUPROV_CI_AUDIENCE)")
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise _refused("the bearer token is not a well-formed JWT") from None
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise _refused(f"the CI token's algorithm {str(alg)[:20]!r} is not accepted")
    issuer = unverified.get("iss")
    if not isinstance(issuer, str):
        raise _refused("the CI token has no issuer")
    rules = rules_for(issuer)
    if not rules:
        raise _refused("no CI trust rule names the token's issuer")
    kid = header.get("kid")
    key = keys.key(issuer, kid if isinstance(kid, str) else None)
    if key.algorithm_name != alg:
        raise _refused(f"the CI token's algorithm {alg} is not its key's ({key.algorithm_name})")
    try:
        claims = jwt.decode(
            token,
            key.key,
            algorithms=[alg],
            audience=audience,
            issuer=issuer,
            leeway=LEEWAY,
            options={"require": ["iss", "aud", "exp", "iat", "jti"], "strict_aud": True},
        )
    except jwt.ExpiredSignatureError:
        raise Unauthorized("the CI token has expired", reason="expired") from None
    except jwt.InvalidAudienceError:
        raise _refused(f"the CI token's audience is not exactly {audience!r}") from None
    except jwt.ImmatureSignatureError:
        raise _refused("the CI token is not valid yet (iat or nbf in the future)") from None
    except jwt.MissingRequiredClaimError as e:
        raise _refused(f"the CI token has no {e.claim!r} claim") from None
    except jwt.PyJWTError as e:
        raise _refused(f"the CI token does not verify: {type(e).__name__}") from None
    iat, exp = claims["iat"], claims["exp"]
    now = time.time()
    if not isinstance(iat, int | float) or iat > now + LEEWAY:
        raise _refused("the CI token's iat is in the future")
    if exp - iat > MAX_LIFETIME:
        raise _refused(f"the CI token lives longer than {MAX_LIFETIME // 3600} h")
    if not isinstance(claims["jti"], str) or not claims["jti"]:
        raise _refused("the CI token's jti is not a string")
    rule = first_match(rules, issuer, claims)
    if rule is None:
        raise _refused("no CI trust rule matches this token's claims")
    granted = recorded_claims(rule, claims)
    subject = granted["claims"].get("repository") or granted["claims"].get("project_path") or ""
    principal = Principal(
        None,
        f"ci:{rule.name}:{subject}"[:128],
        rule.scopes,
        rule.assets,
        None,
        rule.policies,
        granted,
    )
    return CiGrant(principal, use_key(issuer, claims), datetime.fromtimestamp(exp, UTC))


def remember_use(session: Session, grant: CiGrant, now: datetime) -> None:
    """Record that a CI token was used for a call that is not idempotent (a report), in the
    caller's transaction; `Unauthorized` when it was used before (a replayed token)."""
    if not ci_trust.claim_use(session, grant.use_key, grant.expires_at, now):
        raise Unauthorized(
            "this CI token was already used for a report: request a new one for each push",
            reason="replayed",
        )
