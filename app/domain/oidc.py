"""Single sign-on for people: the OpenID Provider as the relying party sees it. Discovery (its
``issuer`` must be the configured one), the authorization request and code exchange (Authlib,
PKCE S256, ``state`` and ``nonce``), the RFC 9207 ``iss`` of the callback, the ID token checked
with PyJWT (asymmetric algorithms the provider lists, bounded clock skew, the nonce), and the
role a user's groups map to.

Nothing here reads a request: the dashboard's sign-in routes (app.http.dashboard.sso) pass what
the callback received. Errors a person can act on are `SignInRefused` (the login page shows
them); a provider that cannot be reached or read is `ServiceUnavailable`.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import jwt
import requests
from authlib.common.urls import add_params_to_uri
from authlib.integrations.requests_client import OAuth2Session
from authlib.oauth2.rfc6749.errors import OAuth2Error

from app.domain.ci_tokens import ALGORITHMS
from app.domain.tokens import Scope
from app.errors import ServiceUnavailable
from app.settings import Settings

#: clock skew allowed on ``exp``, ``iat`` and ``nbf`` (seconds)
LEEWAY = 60
#: the oldest ``iat`` accepted: the token comes straight from the code exchange
MAX_TOKEN_AGE = 600
#: how long discovery and keys are reused before they are fetched again (seconds)
METADATA_TTL = 3600
#: the shortest interval between two key fetches when an ID token names an unknown kid
REFRESH_INTERVAL = 30
MAX_DOCUMENT_BYTES = 256 * 1024
_TIMEOUT = 5.0
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Role(StrEnum):
    """What a person may do, from the groups the provider says they are in."""

    VIEWER = "viewer"
    ANALYST = "analyst"
    ADMIN = "admin"


#: the service scopes each role holds wherever it reads
ROLE_SCOPES: Mapping[Role, frozenset[str]] = {
    Role.VIEWER: frozenset({Scope.INVENTORY_READ.value}),
    Role.ANALYST: frozenset({Scope.INVENTORY_READ.value, Scope.TRIAGE.value}),
    Role.ADMIN: frozenset({Scope.ADMIN.value}),
}
#: what a role holds besides when its reads cover the whole fleet (in no team): policies gate
#: every team's images, so only a fleet-wide analyst changes them (docs/sso.md)
FLEET_SCOPES: Mapping[Role, frozenset[str]] = {Role.ANALYST: frozenset({Scope.POLICY_WRITE.value})}
_RANK = {Role.VIEWER: 0, Role.ANALYST: 1, Role.ADMIN: 2}


def role_scopes(role: Role, *, fleet_wide: bool) -> frozenset[str]:
    """The scopes of `role` for a person whose reads cover the whole fleet (`fleet_wide`: in no
    team, with GPUPROV_TEAMLESS_ACCESS=fleet) or not."""
    extra = FLEET_SCOPES.get(role, frozenset()) if fleet_wide else frozenset()
    return ROLE_SCOPES[role] | extra


@dataclass(frozen=True, slots=True)
class Grant:
    """What an identity-provider group gives: a role, and the team whose asset scope confines
    it (None: no team by this mapping)."""

    role: Role
    team: str | None = None


def grants_of(configured: Mapping[str, Any]) -> dict[str, Grant]:
    """GPUPROV_OIDC_ROLES (``"group": "viewer"`` or ``{"role": ..., "team": ...}``) as grants."""
    return {
        group: Grant(Role(_role_name(grant)), None if isinstance(grant, str) else grant.team)
        for group, grant in configured.items()
    }


def highest(roles: Iterable[Role]) -> Role | None:
    """The highest of `roles` (None for none)."""
    return max(roles, key=_RANK.__getitem__, default=None)


def lower(a: Role, b: Role) -> Role:
    """The lower of two roles."""
    return min(a, b, key=_RANK.__getitem__)


def role_for(groups: Iterable[str], mapping: Mapping[str, Grant]) -> Role | None:
    """The highest role `mapping` gives these groups; None when it gives none (never a default
    role)."""
    return highest(mapping[g].role for g in groups if g in mapping)


class SignInRefused(Exception):
    """A sign-in that cannot be accepted, with what the login page tells the person."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class NoAccess(SignInRefused):
    """A valid sign-in whose groups map to no role: the person has no access."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 403)


@dataclass(frozen=True, slots=True)
class ProviderMetadata:
    """What the provider's discovery document says, checked."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None
    #: the ID token algorithms accepted: the provider's, asymmetric only
    algorithms: tuple[str, ...]
    #: RFC 9207: the provider promises ``iss`` on every authorization response
    iss_parameter_supported: bool


def _same(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())


def _role_name(grant: Any) -> str:
    return grant if isinstance(grant, str) else str(grant.role)


def groups_of(claims: Mapping[str, Any], groups_claim: str) -> list[str]:
    """The ID token's groups (none when the claim is missing or not a list of names)."""
    groups = claims.get(groups_claim)
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        return []
    return sorted(set(groups))[:1024]


def mapped_teams(groups: Sequence[str], mapping: Mapping[str, Grant]) -> list[str]:
    """The teams the group mappings give these groups (``{"role": ..., "team": ...}``)."""
    teams = {mapping[g].team for g in groups if g in mapping}
    return sorted(t for t in teams if t)


def role_of(claims: Mapping[str, Any], groups_claim: str, mapping: Mapping[str, Grant]) -> Role:
    """The highest role the ID token's groups map to (`mapping`: GPUPROV_OIDC_ROLES and the
    stored group mappings); `NoAccess` when none does (never a default role), and for an Entra
    ID groups overage (``_claim_names``), whose groups are not in the token."""
    names = claims.get("_claim_names")
    if isinstance(names, Mapping) and groups_claim in names:
        raise NoAccess(
            f"the provider left the {groups_claim!r} claim out of the ID token (too many "
            "groups: an overage); limit the groups the application receives"
        )
    groups = claims.get(groups_claim)
    if groups is None:
        raise NoAccess(f"the ID token has no {groups_claim!r} claim: no group grants access")
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise NoAccess(f"the ID token's {groups_claim!r} claim is not a list of group names")
    # the groups a session keeps (`groups_of`): each page maps those again (app.domain.users)
    role = role_for(groups_of(claims, groups_claim), mapping)
    if role is None:
        raise NoAccess(
            "none of your groups is given a role in gpuprov (GPUPROV_OIDC_ROLES or the group "
            "mappings of Admin → Group mappings)"
        )
    return role


def check_url(url: str, what: str, *, allow_loopback: bool) -> str:
    """An endpoint the provider names: HTTPS (plain HTTP only on loopback, for tests)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.netloc:
        return url
    if parts.scheme == "http" and parts.hostname in _LOOPBACK and allow_loopback:
        return url
    raise ServiceUnavailable(f"the provider's {what} {url[:200]!r} is not an https URL", 30)


class OpenIdProvider:
    """The configured OpenID Provider: its metadata and keys, cached per process."""

    def __init__(self, settings: Settings) -> None:
        assert settings.oidc_issuer and settings.oidc_client_id and settings.oidc_redirect_url
        self.issuer = settings.oidc_issuer
        self.client_id = settings.oidc_client_id
        secret = settings.oidc_client_secret
        self._secret = (secret.get_secret_value() if secret is not None else "") or None
        self.redirect_url = settings.oidc_redirect_url
        self.scopes = settings.oidc_scopes
        self._allow_loopback = settings.allow_loopback_issuers
        self._lock = threading.Lock()
        self._metadata: tuple[ProviderMetadata, float] | None = None
        self._keys: tuple[dict[str | None, jwt.PyJWK], float] | None = None
        #: the shortest interval between two key fetches for an unknown kid (seconds)
        self.refresh_interval: float = REFRESH_INTERVAL

    # -- discovery and keys ------------------------------------------------------------------

    def metadata(self) -> ProviderMetadata:
        """The provider's checked discovery document (fetched at most once per `METADATA_TTL`)."""
        with self._lock:
            cached = self._metadata
        if cached is not None and time.monotonic() - cached[1] < METADATA_TTL:
            return cached[0]
        document = self._get(self.issuer.rstrip("/") + "/.well-known/openid-configuration")
        # OpenID Connect Discovery §4.3: the document must name exactly the configured issuer,
        # or a provider could pass for another (the mix-up attack)
        if document.get("issuer") != self.issuer:
            raise ServiceUnavailable(
                f"the provider's discovery document names issuer "
                f"{str(document.get('issuer'))[:200]!r}, not GPUPROV_OIDC_ISSUER {self.issuer!r}",
                30,
            )
        urls = {}
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            value = document.get(name)
            if not isinstance(value, str):
                raise ServiceUnavailable(f"the provider's discovery document has no {name}", 30)
            urls[name] = check_url(value, name, allow_loopback=self._allow_loopback)
        end_session = document.get("end_session_endpoint")
        if isinstance(end_session, str):
            end_session = check_url(
                end_session, "end_session_endpoint", allow_loopback=self._allow_loopback
            )
        offered = document.get("id_token_signing_alg_values_supported")
        if not isinstance(offered, list):
            offered = ["RS256"]  # Discovery §3: the field is required, RS256 always in it
        algorithms = tuple(a for a in offered if a in ALGORITHMS)
        if not algorithms:
            raise ServiceUnavailable(
                "the provider signs ID tokens with no asymmetric algorithm gpuprov accepts", 30
            )
        metadata = ProviderMetadata(
            issuer=self.issuer,
            authorization_endpoint=urls["authorization_endpoint"],
            token_endpoint=urls["token_endpoint"],
            jwks_uri=urls["jwks_uri"],
            end_session_endpoint=end_session if isinstance(end_session, str) else None,
            algorithms=algorithms,
            iss_parameter_supported=document.get("authorization_response_iss_parameter_supported")
            is True,
        )
        with self._lock:
            self._metadata = (metadata, time.monotonic())
        return metadata

    def key(self, kid: str | None) -> jwt.PyJWK:
        """The provider's signing key `kid`, fetched again once when unknown (key rotation)."""
        with self._lock:
            cached = self._keys
        now = time.monotonic()
        if cached is None or now - cached[1] > METADATA_TTL:
            cached = self._fetch_keys()
        elif kid not in cached[0] and now - cached[1] >= self.refresh_interval:
            cached = self._fetch_keys()
        keys = cached[0]
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        found = keys.get(kid)
        if found is None:
            raise SignInRefused(
                f"the ID token's key {str(kid)[:80]!r} is not one of the provider's keys"
            )
        return found

    def _fetch_keys(self) -> tuple[dict[str | None, jwt.PyJWK], float]:
        document = self._get(self.metadata().jwks_uri)
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise ServiceUnavailable("the provider's JWKS holds no 'keys' list", 30)
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except (jwt.PyJWKError, jwt.InvalidKeyError):
                continue  # a key type this service does not use
            kid = entry.get("kid")
            keys[kid if isinstance(kid, str) else None] = key
        fresh = (keys, time.monotonic())
        with self._lock:
            self._keys = fresh
        return fresh

    def _get(self, url: str) -> dict[str, Any]:
        try:
            with requests.Session() as http:
                http.trust_env = False  # no proxy from the environment: the address asked is used
                answer = http.get(
                    url,
                    timeout=_TIMEOUT,
                    allow_redirects=False,
                    headers={"Accept": "application/json"},
                    stream=True,
                )
                if answer.status_code != 200:
                    raise ServiceUnavailable(f"{url} answered {answer.status_code}", 30)
                body = answer.raw.read(MAX_DOCUMENT_BYTES + 1, decode_content=True)
        except requests.RequestException as e:
            raise ServiceUnavailable(f"cannot reach {url}: {type(e).__name__}", 30) from None
        if len(body) > MAX_DOCUMENT_BYTES:
            raise ServiceUnavailable(f"{url} is larger than {MAX_DOCUMENT_BYTES} bytes", 30)
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise ServiceUnavailable(f"{url} is not JSON", 30) from None
        if not isinstance(document, dict):
            raise ServiceUnavailable(f"{url} is not a JSON object", 30)
        return document

    # -- the flow ----------------------------------------------------------------------------

    def _client(self) -> OAuth2Session:
        client = OAuth2Session(
            self.client_id,
            self._secret,
            scope=self.scopes,
            redirect_uri=self.redirect_url,
            code_challenge_method="S256",
            token_endpoint_auth_method="client_secret_basic" if self._secret else "none",
        )
        client.trust_env = False
        return client

    def authorization_url(self, state: str, nonce: str, code_verifier: str) -> str:
        """Where the browser goes to sign in (code flow, PKCE S256, state and nonce)."""
        endpoint = self.metadata().authorization_endpoint
        with self._client() as client:
            url, _ = client.create_authorization_url(
                endpoint, state=state, code_verifier=code_verifier, nonce=nonce
            )
        return str(url)

    def check_response_issuer(self, iss: str | None) -> None:
        """RFC 9207 §2.4: the callback's ``iss`` must be the issuer, and must be present when
        the provider promises it (a response from another provider the browser talks to)."""
        metadata = self.metadata()
        if iss is None:
            if metadata.iss_parameter_supported:
                raise SignInRefused("the provider's answer has no iss parameter (RFC 9207)")
            return
        if not _same(metadata.issuer, iss):
            raise SignInRefused(
                f"the answer comes from issuer {iss[:200]!r}, not {metadata.issuer!r}"
            )

    def exchange(self, code: str, code_verifier: str) -> str:
        """The ID token the provider's token endpoint gives for `code` (with the PKCE
        verifier)."""
        endpoint = self.metadata().token_endpoint
        try:
            with self._client() as client:
                token = client.fetch_token(
                    endpoint,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=code_verifier,
                    timeout=_TIMEOUT,
                    allow_redirects=False,
                )
        except OAuth2Error as e:
            raise SignInRefused(f"the provider refused the code: {e.error}") from None
        except requests.RequestException as e:
            raise ServiceUnavailable(
                f"cannot reach the provider's token endpoint: {type(e).__name__}", 30
            ) from None
        except ValueError:
            raise SignInRefused("the provider's token endpoint did not answer JSON") from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInRefused("the provider's answer holds no ID token")
        return id_token

    def verify_id_token(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The claims of an ID token checked as OpenID Connect Core §3.1.3.7 says; the steps
        Authlib leaves to the caller included."""
        metadata = self.metadata()
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError:
            raise SignInRefused("the ID token is not a well-formed JWT") from None
        alg = header.get("alg")
        # §3.1.3.7 step 7: the algorithm is one the provider lists and we accept: never none,
        # never HMAC (whose "key" would be the provider's public key)
        if alg not in metadata.algorithms:
            raise SignInRefused(f"the ID token's algorithm {str(alg)[:20]!r} is not accepted")
        kid = header.get("kid")
        key = self.key(kid if isinstance(kid, str) else None)
        declared = key._jwk_data.get("alg")  # noqa: SLF001 - the JWK's own "alg", if it has one
        if declared is not None and declared != alg:
            raise SignInRefused(f"the ID token's algorithm {alg} is not its key's ({declared})")
        try:
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key.key,
                algorithms=[alg],
                audience=self.client_id,
                issuer=metadata.issuer,
                leeway=LEEWAY,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.ExpiredSignatureError:
            raise SignInRefused("the ID token has expired") from None
        except jwt.InvalidAudienceError:
            raise SignInRefused("the ID token is not for this client (aud)") from None
        except jwt.InvalidIssuerError:
            raise SignInRefused("the ID token comes from another issuer") from None
        except jwt.ImmatureSignatureError:
            raise SignInRefused(
                "the ID token is not valid yet (iat or nbf in the future)"
            ) from None
        except jwt.MissingRequiredClaimError as e:
            raise SignInRefused(f"the ID token has no {e.claim!r} claim") from None
        except jwt.PyJWTError as e:
            raise SignInRefused(f"the ID token does not verify: {type(e).__name__}") from None
        now = time.time()
        iat = claims["iat"]
        if not isinstance(iat, int | float) or iat > now + LEEWAY:
            raise SignInRefused("the ID token's iat is in the future")
        if iat < now - MAX_TOKEN_AGE - LEEWAY:
            raise SignInRefused("the ID token was issued too long ago")
        # §3.1.3.7 steps 4-5: several audiences need azp, and azp must be this client
        audience = claims["aud"]
        azp = claims.get("azp")
        if (isinstance(audience, list) and len(audience) > 1 and azp is None) or (
            azp is not None and azp != self.client_id
        ):
            raise SignInRefused("the ID token was issued to another client (azp)")
        # §3.1.3.7 step 11: the nonce of this sign-in, which a replayed token does not carry
        given = claims.get("nonce")
        if not isinstance(given, str) or not _same(nonce, given):
            raise SignInRefused("the ID token's nonce is not this sign-in's")
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject or len(subject) > 255:
            raise SignInRefused("the ID token's sub is not a string of 1 to 255 characters")
        return claims

    def end_session_url(self, id_token: str | None, after: str) -> str | None:
        """RP-initiated logout at the provider, where it offers one (None otherwise)."""
        try:
            endpoint = self.metadata().end_session_endpoint
        except ServiceUnavailable:
            return None
        if endpoint is None:
            return None
        params = {"client_id": self.client_id, "post_logout_redirect_uri": after}
        if id_token:
            params["id_token_hint"] = id_token
        return str(add_params_to_uri(endpoint, params))
