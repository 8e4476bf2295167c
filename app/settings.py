"""Service settings read from the environment (prefix ``GPUPROV_``) by pydantic-settings.

Nothing reads them at import time: `create_app(settings)` and the CLI build a `Settings` and pass
it down, so tests and tools can run several configurations in one process.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: shortest accepted GPUPROV_SECRET_KEY: a short key makes session cookies guessable
MIN_SECRET_KEY_LENGTH = 16
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def normalize_database_url(url: str) -> str:
    """Use psycopg 3 for plain ``postgresql://`` URLs (SQLAlchemy would pick psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


RoleName = Literal["viewer", "analyst", "admin"]


class GroupGrant(BaseModel):
    """What an IdP group gives: a role, and a team whose asset scope confines it (docs/teams.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: RoleName
    team: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")


class Settings(BaseSettings):
    """Configuration of one service process."""

    model_config = SettingsConfigDict(env_prefix="GPUPROV_", extra="ignore")

    environment: Literal["development", "production", "test"] = "development"
    database_url: str = "sqlite:///./gpuprov.db"
    #: seconds a database connection attempt may take before the request answers 503
    database_connect_timeout: int = Field(default=5, ge=1, le=120)
    database_pool_size: int = Field(default=10, ge=1, le=200)
    #: connections opened beyond the pool under load, closed when returned (PostgreSQL only;
    #: SQLite keeps 20): pool size + overflow bounds what one process asks of the server
    database_max_overflow: int = Field(default=10, ge=0, le=200)
    #: seconds a request waits for a free pooled connection before it answers 503
    database_pool_timeout: float = Field(default=10, gt=0, le=120)
    #: seconds one SQL statement may run before the database interrupts it (the request then
    #: answers 503); bounds what any single request can cost the database
    database_statement_timeout: float = Field(default=30, gt=0, le=3600)
    #: most values one repeatable filter (``label=``) may carry in one request
    max_filter_values: int = Field(default=20, ge=1, le=1000)
    #: largest accepted report, compressed and decompressed (bytes)
    max_report_bytes: int = Field(default=50 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    #: largest accepted advisory document (CSAF, OSV, CVE Record), by the CLI and the API
    max_advisory_bytes: int = Field(default=32 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    #: the ``author`` of the VEX documents the service writes (GET /api/v1/assets/{id}/vex)
    vex_author: str = Field(default="gpuprov", min_length=1, max_length=256)
    #: largest VEX document ``POST /api/v1/vex`` reads (bytes)
    max_vex_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    #: value of the Retry-After header when the database is unavailable
    retry_after_seconds: int = Field(default=30, ge=1, le=3600)
    #: signs the dashboard's session cookies (HMAC-SHA256); unset outside production: a random
    #: key per process (sessions end when it restarts and are not shared between workers)
    secret_key: str = ""
    #: seconds a dashboard session lasts after login (then the token must be entered again)
    session_lifetime_seconds: int = Field(default=8 * 3600, ge=60, le=30 * 86_400)
    #: seconds the dashboard overview's fleet figures are reused by a worker before they are
    #: computed again (each a pass over the current files); 0 computes them on every request
    dashboard_cache_seconds: int = Field(default=30, ge=0, le=3600)
    #: the promotion policy the dashboard's compliance pages show when none is asked for; unset
    #: (or not stored): the policy the gate used most in the last 30 days, else the first by name
    default_policy: str | None = Field(default=None, max_length=128)
    #: mark the session cookie Secure even on plain-HTTP requests (a TLS-terminating proxy that
    #: does not forward the scheme); it is always Secure on HTTPS requests
    cookie_secure: bool = False
    #: reject reports whose JSON nests deeper than this
    max_json_depth: int = Field(default=64, ge=8, le=512)
    #: most components in one report, nested ones included (413 above)
    max_report_components: int = Field(default=100_000, ge=1, le=10_000_000)
    #: most properties on one component, or on the report's metadata (413 above)
    max_component_properties: int = Field(default=1_000, ge=1, le=100_000)
    #: how far ahead of the service's clock a report's metadata.timestamp may be (seconds)
    max_clock_skew_seconds: int = Field(default=300, ge=0, le=86_400)
    #: reports one process ingests at a time; one more answers 503 with Retry-After
    max_concurrent_ingests: int = Field(default=8, ge=1, le=1_000)
    #: of those, most one token may hold at once (None: half of them, at least one), so one
    #: token (a stolen one, a misbehaving CI job) cannot keep every other agent out
    max_concurrent_ingests_per_token: int | None = Field(default=None, ge=1, le=1_000)
    #: seconds a request body may take to arrive once the service starts reading it, extended
    #: by one second for each ``body_min_rate`` bytes received (Apache's mod_reqtimeout rule):
    #: a body slower than that answers 408 and gives back the ingest slot it held
    body_timeout_seconds: float = Field(default=20, gt=0, le=3600)
    #: bytes a second a request body must keep up, on average, past ``body_timeout_seconds``
    body_min_rate: int = Field(default=16 * 1024, ge=1, le=1024 * 1024 * 1024)
    #: most labels one asset carries (the report's ``gpuprov:label:`` properties and the
    #: push's ``label`` parameters together); more answers 413. The default is the CLI's
    #: own cap on ``--label`` (scanner.vocabulary.MAX_ASSET_LABELS)
    max_asset_labels: int = Field(default=100, ge=1, le=10_000)
    #: scan history each asset keeps: its N newest scans (None: no count limit) ...
    retention_keep_scans: int | None = Field(default=None, ge=1, le=1_000_000)
    #: ... or its scans of the last D days (None: no age limit); with both, a scan stays while
    #: either keeps it; an asset's latest scan always stays. Applied after each ingest to the
    #: reporting asset, and fleet-wide by `gpuprov db prune`
    retention_days: int | None = Field(default=None, ge=1, le=36_500)
    #: PEM private key (unencrypted; ECDSA, Ed25519 or RSA) signing the VSA of an allowed gate
    #: decision; none: the gate answers without a VSA
    vsa_key_file: Path | None = None
    #: the service's public base URL (``https://gpuprov.example.com``): a signed VSA names its
    #: policy under it. Unset: a URN holding the policy's name, version and digest. Never taken
    #: from a request (its Host header is the caller's to choose)
    public_url: str | None = None
    #: the VSA's ``verifier.id``: what admission controllers pin (``gpuprov verify --verifier-id``)
    vsa_verifier_id: str = Field(default="https://gpuprov.dev/gate", min_length=1, max_length=512)
    #: authors whose advisory analyses change what the gate sees (comma-separated, exact: a
    #: token's name, a person's email, a VEX document's author); analyses by others are shown
    #: but decide nothing. Empty (the default): no analysis changes a decision (docs/advisories.md)
    vex_trusted_authors: str = Field(default="", max_length=8192)
    #: days after a runtime proposal's window ends that an accepted proposal's analysis holds
    #: (a newer --runtime report that still sees the library unmapped moves the window)
    runtime_proposal_days: int = Field(default=30, ge=1, le=365)
    #: proxies whose ``X-Forwarded-For``/``-Proto`` headers are believed: IP addresses or CIDR
    #: ranges, comma-separated. Empty (the default): none; the connection's peer is the client
    forwarded_allow_ips: str = ""
    #: failed authentications (unknown, revoked or expired token) one client may make within
    #: ``auth_failure_window_seconds`` before its requests answer 429 (per worker process)
    auth_failure_limit: int = Field(default=10, ge=1, le=1_000_000)
    auth_failure_window_seconds: int = Field(default=60, ge=1, le=86_400)
    #: who may read ``/metrics``: ``token`` (an inventory:read token) or ``none`` (anyone)
    metrics_auth: Literal["token", "none"] = "token"
    #: the audience CI jobs request their OIDC ID tokens for (keyless CI, docs/ci.md); unset:
    #: CI tokens are refused. Never a provider's default audience (GitHub's is the owner's URL)
    ci_audience: str | None = Field(default=None, min_length=1, max_length=256)
    #: plain-HTTP issuers on 127.0.0.1 / localhost for CI trust rules (tests only)
    allow_loopback_issuers: bool = False
    #: issuer → JWKS file, for installs that cannot reach an issuer (JSON object)
    ci_jwks_files: dict[str, Path] = Field(default_factory=dict)
    #: single sign-on for people (docs/sso.md): the OpenID Provider's issuer URL, exactly as
    #: its discovery document names it; unset: no "Sign in with" button
    oidc_issuer: str | None = Field(default=None, max_length=1024)
    oidc_client_id: str | None = Field(default=None, max_length=512)
    #: a secret: kept out of the settings' repr and of validation errors' echoes
    oidc_client_secret: SecretStr | None = Field(default=None)
    #: the callback registered at the provider: ``https://gpuprov.example.com/login/sso/callback``
    oidc_redirect_url: str | None = Field(default=None, max_length=2048)
    oidc_scopes: str = Field(default="openid email profile groups", max_length=1024)
    #: the ID token claim listing the user's groups
    oidc_groups_claim: str = Field(default="groups", min_length=1, max_length=128)
    #: group → role (``viewer``, ``analyst`` or ``admin``), or ``{"role": ..., "team": ...}``
    #: naming the team the group's members belong to; a JSON object; a user in no mapped group
    #: has no access
    oidc_roles: dict[str, RoleName | GroupGrant] = Field(default_factory=dict)
    #: label keys that only admins assign (``PUT /api/v1/assets/{id}/labels``): a report's
    #: labels of these keys, and of the keys teams select on, are ignored (docs/teams.md)
    scoping_labels: list[str] = Field(default_factory=list, max_length=256)
    #: what a non-admin caller in no team sees: ``fleet`` (everything, as before teams) or
    #: ``none`` (no asset: with teams in use, leaving a team's group leaves its assets)
    teamless_access: Literal["fleet", "none"] = "fleet"
    #: the provider's name on the login page's button
    oidc_provider_name: str = Field(default="single sign-on", min_length=1, max_length=64)
    #: seconds a signed-in session is trusted before the provider is asked again (groups and
    #: role re-read; a user removed from every mapped group loses access then)
    oidc_refresh_seconds: int = Field(default=900, ge=30, le=86_400)
    #: the login form for service tokens (break-glass, small installs); off: hidden and refused
    token_login: bool = True
    #: ``text`` (one line with a timestamp) or ``json`` (one object a line, with request ids)
    log_format: Literal["text", "json"] = "text"
    #: webhooks (docs/webhooks.md): allow receivers on loopback addresses, and plain http to
    #: them (tests only; every other internal address stays refused)
    webhook_allow_loopback: bool = False
    #: CA bundle for HTTPS receivers with a private CA; unset: the default bundle
    webhook_ca_file: Path | None = None
    #: seconds between two rounds of the in-process delivery worker; 0: none in this process
    #: (run `gpuprov webhooks deliver` instead, e.g. from a CronJob)
    webhook_worker_seconds: float = Field(default=5, ge=0, le=3600)
    #: attempts before a delivery is dead-lettered
    webhook_max_attempts: int = Field(default=15, ge=1, le=100)
    #: the first retry's delay (seconds); each further one doubles it, up to the maximum
    webhook_backoff_seconds: float = Field(default=10, gt=0, le=86_400)
    webhook_backoff_max_seconds: float = Field(default=6 * 3600, gt=0, le=7 * 86_400)
    #: seconds to connect to a receiver, and seconds each read of its answer may take
    webhook_connect_timeout_seconds: float = Field(default=5, gt=0, le=60)
    webhook_timeout_seconds: float = Field(default=15, gt=0, le=120)
    #: bytes of a receiver's answer read at most (it is discarded: only the status counts)
    webhook_max_response_bytes: int = Field(default=64 * 1024, ge=1, le=16 * 1024 * 1024)
    #: days before a token expires that a token.expiring event is sent
    webhook_token_warning_days: int = Field(default=7, ge=1, le=365)

    @field_validator("database_url")
    @classmethod
    def _driver(cls, value: str) -> str:
        return normalize_database_url(value)

    @field_validator("default_policy")
    @classmethod
    def _default_policy(cls, value: str | None) -> str | None:
        # GPUPROV_DEFAULT_POLICY= (set but empty) means no default, as unset does
        return value.strip() or None if value is not None else None

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise ValueError("GPUPROV_PUBLIC_URL must be an http(s) URL such as https://host")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("GPUPROV_PUBLIC_URL takes no query, fragment or credentials")
        return value.strip().rstrip("/")

    @field_validator("ci_audience")
    @classmethod
    def _ci_audience(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if value.startswith("https://github.com/"):
            raise ValueError(
                "GPUPROV_CI_AUDIENCE must not be GitHub's default audience (the owner's URL): "
                "choose one for this service, such as gpuprov"
            )
        return value.strip()

    @field_validator("oidc_issuer", "oidc_redirect_url")
    @classmethod
    def _oidc_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise ValueError(f"{value!r} is not an http(s) URL")
        if parts.fragment or parts.username or parts.password:
            raise ValueError(f"{value!r}: an OIDC URL takes no fragment or credentials")
        return value.strip()

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxies(cls, value: str) -> str:
        items = [item.strip() for item in value.split(",") if item.strip()]
        for item in items:
            if item == "*":
                raise ValueError(
                    "GPUPROV_FORWARDED_ALLOW_IPS: '*' would let every client choose its address;"
                    " list the proxies' addresses or ranges"
                )
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(
                    f"GPUPROV_FORWARDED_ALLOW_IPS: {item!r} is not an IP address or CIDR range"
                ) from None
        return ",".join(items)

    @model_validator(mode="after")
    def _refuse_unsafe_defaults(self) -> Settings:
        if self.environment == "production" and not self.secret_key:
            raise ValueError("GPUPROV_SECRET_KEY must be set when GPUPROV_ENVIRONMENT=production")
        per_token = self.max_concurrent_ingests_per_token
        if per_token is not None and per_token > self.max_concurrent_ingests:
            raise ValueError(
                f"GPUPROV_MAX_CONCURRENT_INGESTS_PER_TOKEN ({per_token}) is more than "
                f"GPUPROV_MAX_CONCURRENT_INGESTS ({self.max_concurrent_ingests})"
            )
        if self.secret_key and len(self.secret_key) < MIN_SECRET_KEY_LENGTH:
            raise ValueError(
                f"GPUPROV_SECRET_KEY must hold at least {MIN_SECRET_KEY_LENGTH} characters "
                "(e.g. `openssl rand -hex 32`)"
            )
        self._check_oidc()
        return self

    def _check_oidc(self) -> None:
        named = {
            "GPUPROV_OIDC_CLIENT_ID": self.oidc_client_id,
            "GPUPROV_OIDC_REDIRECT_URL": self.oidc_redirect_url,
        }
        if self.oidc_issuer is None:
            return
        missing = [name for name, value in named.items() if not value]
        if missing:
            raise ValueError(f"GPUPROV_OIDC_ISSUER is set: {', '.join(missing)} must be set too")
        if "openid" not in self.oidc_scopes.split():
            raise ValueError("GPUPROV_OIDC_SCOPES must include openid")
        issuer, redirect = urlsplit(self.oidc_issuer), urlsplit(self.oidc_redirect_url or "")
        if issuer.scheme == "http" and not (
            issuer.hostname in _LOOPBACK and self.allow_loopback_issuers
        ):
            raise ValueError(
                "GPUPROV_OIDC_ISSUER must be https (a plain-HTTP loopback issuer only with "
                "GPUPROV_ALLOW_LOOPBACK_ISSUERS=1, for tests)"
            )
        if redirect.scheme == "http" and redirect.hostname not in _LOOPBACK:
            # the authorization code would cross the network in clear text
            raise ValueError("GPUPROV_OIDC_REDIRECT_URL must be https (or a loopback address)")

    @property
    def oidc_enabled(self) -> bool:
        """Whether people may sign in with the configured OpenID Provider."""
        return self.oidc_issuer is not None

    @property
    def ingests_per_token(self) -> int:
        """The ingest slots one token may hold at once."""
        if self.max_concurrent_ingests_per_token is not None:
            return self.max_concurrent_ingests_per_token
        return max(1, self.max_concurrent_ingests // 2)

    @property
    def trusted_authors(self) -> frozenset[str]:
        """The authors of ``vex_trusted_authors``."""
        return frozenset(a.strip() for a in self.vex_trusted_authors.split(",") if a.strip())

    @property
    def is_sqlite(self) -> bool:
        """Whether the database is an embedded SQLite file."""
        return self.database_url.startswith("sqlite")
