"""The tables: tokens, assets and their labels, scans with their raw BOMs, packages and GPU
library artifacts, the per-asset summary of the current state, and the provenance inputs (trust
policy versions, signed reference catalogs and their entries).

Current-state queries never read history: an artifact row carries ``is_current`` (true exactly
for the rows of its asset's latest scan) and its digest and asset indexes are partial on that
flag; `AssetLibrary` holds one row per (asset, family, version, CUDA major) of the latest scan,
so family/version questions and the fleet-wide aggregate read a few rows per asset.

Promotion policies are versioned documents; every gate decision is an audit row; fleet
compliance is stored per (policy, asset) and per (policy, control, asset) when a scan or a
policy changes, so compliance reads count index rows instead of evaluating.

Security advisories are documents (one row per publisher namespace and tracking id: the current
revision), their vulnerabilities (a CVE may be in several documents) and each product's status
with its version text, parsed and as written; a status a newer revision drops is closed with
the reason, never deleted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.base import Base, BigId, SortKey, UTCDateTime

# Each dialect's index predicate is spelled the way SQLAlchemy renders `WHERE Artifact.is_current`
# there, so the planners see the query's term in the index's WHERE clause and use the index.
_CURRENT_PG = text("is_current")
_CURRENT_SQLITE = text("is_current = 1")
#: the overview's file rows (a literal in the queries too: see FINDING_PREDICATE)
CURRENT_FILE = "kind = 'file'"
#: a current file that is not the vendor's bytes: tampered against a signed catalog, changed
#: since its package installed it, or owned by no package
FINDING_PREDICATE = "(provenance = 'conflict' OR integrity IN ('modified', 'unowned'))"


class ApiToken(Base):
    """A bearer token: only its SHA-256 is stored; the secret is shown once at creation."""

    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    scopes: Mapped[list[str]] = mapped_column(JSON)
    #: fnmatch patterns of asset names a ``report:write`` token may report for; empty = any
    asset_patterns: Mapped[list[str]] = mapped_column(JSON)
    #: names of the policies a ``gate`` token may gate under; empty = any
    policy_names: Mapped[list[str]] = mapped_column(JSON, server_default=text("'[]'"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: after this time the token no longer authenticates (None: never expires)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: the token that replaced this one when it was rotated (it cannot be rotated again)
    replaced_by_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("api_token.id", ondelete="SET NULL")
    )
    #: the team whose asset scope confines the token (None: the whole fleet); a team with
    #: tokens cannot be deleted (RESTRICT): its tokens would see everything
    team_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("team.id", ondelete="RESTRICT"), index=True
    )


class Team(Base):
    """A team (app.domain.teams): its members (users by issuer and subject, IdP groups) and its
    asset scope (scoping labels every asset of it carries, and asset name patterns)."""

    __tablename__ = "team"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    #: scoping labels (key to value) every asset in the scope carries, all of them
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    #: asset name patterns (``*``, ``?``); an asset in the scope matches one; empty: any name
    names: Mapped[list[str]] = mapped_column(JSON)
    #: members by ID token issuer and subject: ``[{"issuer": ..., "subject": ...}]``
    users: Mapped[list[dict[str, str]]] = mapped_column(JSON)
    #: members by the IdP groups of their last sign-in
    groups: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class OidcGroupMapping(Base):
    """An identity-provider group mapped by an admin (app.domain.group_mappings): the role its
    members get and, optionally, the team they belong to. GPUPROV_OIDC_ROLES maps groups too;
    a group it names is never stored here."""

    __tablename__ = "oidc_group_mapping"

    group_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    #: ``viewer``, ``analyst`` or ``admin``
    role: Mapped[str] = mapped_column(String(16))
    #: a team's name (None: no team by this mapping); a team removed later confines to nothing
    team: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class CiTrustRule(Base):
    """A CI trust rule (app.domain.ci_claims): which claims of a CI provider's OIDC ID token
    grant which rights. The document is the rule as the API shows it."""

    __tablename__ = "ci_trust_rule"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    issuer: Mapped[str] = mapped_column(String(1024))
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class CiTokenUse(Base):
    """A CI ID token already used for a call that is not idempotent (a report), kept until the
    token expires: the same token is refused a second time."""

    __tablename__ = "ci_token_use"

    #: SHA-256 of the issuer and the token's ``jti``
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class AppUser(Base):
    """A person who signed in with the OpenID Provider, identified by the ID token's issuer and
    subject (OIDC Core §5.7: never by email, which the provider lets change and reuse)."""

    __tablename__ = "app_user"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    issuer: Mapped[str] = mapped_column(String(1024))
    subject: Mapped[str] = mapped_column(String(255))
    #: as the provider last said them (for people to read; never used to identify)
    email: Mapped[str | None] = mapped_column(String(320))
    name: Mapped[str | None] = mapped_column(String(256))
    #: the role of the last sign-in (``viewer``, ``analyst``, ``admin``); None: no access
    role: Mapped[str | None] = mapped_column(String(16))
    #: the IdP groups of the last sign-in (team membership by group)
    groups: Mapped[list[str]] = mapped_column(JSON, server_default=text("'[]'"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_login_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WebSession(Base):
    """A signed-in person's dashboard session, server-side: the cookie holds a random id whose
    SHA-256 is the key here, so deleting the row ends the session."""

    __tablename__ = "web_session"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("app_user.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))
    csrf: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: the maximum lifetime's end (GPUPROV_SESSION_LIFETIME_SECONDS from sign-in)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    #: when the provider last vouched for the user and their groups
    verified_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: the last ID token, the ``id_token_hint`` of RP-initiated logout
    id_token: Mapped[str | None] = mapped_column(Text)


class SsoLogin(Base):
    """A sign-in under way: what the callback checks (state, nonce, the PKCE verifier) and the
    browser that started it. Deleted when used, so a state is good once."""

    __tablename__ = "sso_login"

    #: SHA-256 of the ``state`` parameter
    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: SHA-256 of the random value in the starting browser's cookie
    browser_hash: Mapped[str] = mapped_column(String(64))
    nonce: Mapped[str] = mapped_column(String(128))
    code_verifier: Mapped[str] = mapped_column(String(128))
    next_url: Mapped[str] = mapped_column(String(2048))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class AuditEvent(Base):
    """One administrative action (token created, revoked or rotated; trust policy, catalog or
    promotion policy stored), by the API or the CLI. Kept when the token goes."""

    __tablename__ = "audit_event"
    __table_args__ = (Index(None, "at"), Index(None, "action", "at"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: ``api`` or ``cli``
    source: Mapped[str] = mapped_column(String(8))
    #: the acting token's name (API), or ``cli`` with the operating-system user
    actor: Mapped[str] = mapped_column(String(128))
    actor_token_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("api_token.id", ondelete="SET NULL")
    )
    #: a signed-in person: the ID token's issuer and subject (the actor column holds the email)
    actor_issuer: Mapped[str | None] = mapped_column(String(1024))
    actor_subject: Mapped[str | None] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(64))
    #: what the action was on: ``token:12``, ``policy:prod@3``, ``catalog:golden``
    target: Mapped[str] = mapped_column(String(1024))
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    request_id: Mapped[str | None] = mapped_column(String(128))


class Asset(Base):
    """An image (identified by manifest digest) or a host (by machine id)."""

    __tablename__ = "asset"
    __table_args__ = (UniqueConstraint("kind", "identity"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    identity: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(1024), index=True)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    #: what the latest report said about the asset (reference, digest, platform, hostname...)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    latest_scan_id: Mapped[int | None] = mapped_column(
        BigId,
        ForeignKey("scan.id", use_alter=True, ondelete="SET NULL"),
    )
    #: scanned_at of the latest scan, so ingest orders a new scan without reading the old one
    latest_scanned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime)


class AssetLabel(Base):
    """One label of an asset, kept as rows so label filters are index-backed."""

    __tablename__ = "asset_label"
    __table_args__ = (Index(None, "key", "value"),)

    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class AssetScopeLabel(Base):
    """A scoping label of an asset, assigned by an admin on the server (never by a report):
    the only labels team scopes match (app.domain.teams)."""

    __tablename__ = "asset_scope_label"
    __table_args__ = (Index(None, "key", "value"),)

    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class Scan(Base):
    """One ingested report. ``dedup_key`` makes ingest idempotent."""

    __tablename__ = "scan"
    __table_args__ = (Index(None, "asset_id", "scanned_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    asset_id: Mapped[int] = mapped_column(BigId, ForeignKey("asset.id", ondelete="CASCADE"))
    #: serial number and BOM version, or the content digest when the BOM has no serial number
    dedup_key: Mapped[str] = mapped_column(String(200), unique=True)
    serial_number: Mapped[str | None] = mapped_column(String(128))
    bom_version: Mapped[int] = mapped_column(Integer)
    content_sha256: Mapped[str] = mapped_column(String(64))
    spec_version: Mapped[str] = mapped_column(String(8))
    producer: Mapped[str] = mapped_column(String(32))
    tool: Mapped[str] = mapped_column(Text)
    scanned_at: Mapped[datetime] = mapped_column(UTCDateTime)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    library_count: Mapped[int] = mapped_column(Integer)
    findings: Mapped[list[str]] = mapped_column(JSON)
    skipped: Mapped[list[str]] = mapped_column(JSON)
    token_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("api_token.id", ondelete="SET NULL")
    )
    # What the image's signatures and attestations established, as the report's
    # metadata.component said (the scanner checked them against its trust policy).
    image_signer: Mapped[str | None] = mapped_column(Text)
    slsa_level: Mapped[int | None] = mapped_column(Integer)
    slsa_builder: Mapped[str | None] = mapped_column(Text)
    slsa_source_repo: Mapped[str | None] = mapped_column(Text)
    signature_rejected: Mapped[list[str]] = mapped_column(JSON, server_default=text("'[]'"))
    #: what a --runtime scan covered (proc, processes, loading, unreadable); None: not looked
    runtime: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class RawBom(Base):
    """The report exactly as received (after transport decompression), gzip-compressed."""

    __tablename__ = "raw_bom"

    scan_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("scan.id", ondelete="CASCADE"), primary_key=True
    )
    media_type: Mapped[str] = mapped_column(String(128))
    size: Mapped[int] = mapped_column(BigInteger)
    gzip_data: Mapped[bytes] = mapped_column(LargeBinary)


class Package(Base):
    """An owner package of a GPU library, or a GPU package a third-party BOM listed."""

    __tablename__ = "package"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    scan_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("scan.id", ondelete="CASCADE"), index=True
    )
    purl: Mapped[str | None] = mapped_column(Text)
    manager: Mapped[str | None] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(Text)
    version: Mapped[str | None] = mapped_column(Text)
    bom_ref: Mapped[str | None] = mapped_column(Text)
    #: the source package it was built from and the source's version (dpkg's ``Source:``),
    #: which OSV's Debian advisories name; None: the BOM does not say
    source_name: Mapped[str | None] = mapped_column(Text)
    source_version: Mapped[str | None] = mapped_column(Text)


class Artifact(Base):
    """One GPU library in one scan: a file (path + digest) or, from other tools, a package."""

    __tablename__ = "artifact"
    __table_args__ = (
        Index(
            "ix_artifact_current_sha256",
            "sha256",
            "asset_id",
            postgresql_where=_CURRENT_PG,
            sqlite_where=_CURRENT_SQLITE,
        ),
        Index(
            "ix_artifact_current_asset_id",
            "asset_id",
            postgresql_where=_CURRENT_PG,
            sqlite_where=_CURRENT_SQLITE,
        ),
        # the dashboard's search by file name (libraries page)
        Index(
            "ix_artifact_current_name",
            "name",
            "asset_id",
            postgresql_where=_CURRENT_PG,
            sqlite_where=_CURRENT_SQLITE,
        ),
        # the overview's fleet figures from the index alone: verdict shares (index-only scan)
        # and digest conflicts (grouped in index order, no sort); only queries that name
        # kind = 'file' literally can use it, so lookups by digest keep their own index
        Index(
            "ix_artifact_current_facts",
            "family",
            "component",
            "version",
            "cuda_major",
            "arch",
            "sha256",
            "integrity",
            "provenance",
            postgresql_where=text(f"is_current AND {CURRENT_FILE}"),
            sqlite_where=text(f"is_current = 1 AND {CURRENT_FILE}"),
        ),
        # the verdict filters (asset list, where-used): the assets with a current file of one
        # integrity or provenance verdict, from the index alone
        Index(
            "ix_artifact_current_integrity",
            "integrity",
            "asset_id",
            postgresql_where=_CURRENT_PG,
            sqlite_where=_CURRENT_SQLITE,
        ),
        Index(
            "ix_artifact_current_provenance",
            "provenance",
            "asset_id",
            postgresql_where=_CURRENT_PG,
            sqlite_where=_CURRENT_SQLITE,
        ),
        # drift's loaded-differs-from-disk list: the few current files with a disk digest,
        # in the list's order (without it the list read every current file)
        Index(
            "ix_artifact_current_loaded_drift",
            "asset_id",
            "path",
            "id",
            postgresql_where=text("is_current AND disk_sha256 IS NOT NULL"),
            sqlite_where=text("is_current = 1 AND disk_sha256 IS NOT NULL"),
        ),
        # the overview's most urgent findings: the few current files that are not the
        # vendor's bytes (the predicate is the query's, spelled identically: FINDING_PREDICATE)
        Index(
            "ix_artifact_current_findings",
            "asset_id",
            postgresql_where=text(f"is_current AND {FINDING_PREDICATE}"),
            sqlite_where=text(f"is_current = 1 AND {FINDING_PREDICATE}"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    scan_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("scan.id", ondelete="CASCADE"), index=True
    )
    asset_id: Mapped[int] = mapped_column(BigId, ForeignKey("asset.id", ondelete="CASCADE"))
    is_current: Mapped[bool] = mapped_column(Boolean)
    kind: Mapped[str] = mapped_column(String(16))  # "file" | "package"
    name: Mapped[str] = mapped_column(Text)
    path: Mapped[str | None] = mapped_column(Text)
    family: Mapped[str] = mapped_column(String(64))
    component: Mapped[str | None] = mapped_column(String(128))
    version: Mapped[str | None] = mapped_column(String(128))
    version_key: Mapped[str | None] = mapped_column(SortKey)
    cuda_major: Mapped[int | None] = mapped_column(Integer)
    arch: Mapped[str | None] = mapped_column(String(32))
    sha256: Mapped[str | None] = mapped_column(String(64))
    integrity: Mapped[str | None] = mapped_column(String(16))
    integrity_reason: Mapped[str | None] = mapped_column(Text)
    provenance: Mapped[str | None] = mapped_column(String(16))
    provenance_signer: Mapped[str | None] = mapped_column(Text)
    provenance_catalog: Mapped[str | None] = mapped_column(Text)
    provenance_reason: Mapped[str | None] = mapped_column(Text)
    layer: Mapped[str | None] = mapped_column(String(80))
    owner_purl: Mapped[str | None] = mapped_column(Text)
    soname: Mapped[str | None] = mapped_column(Text)
    aliases: Mapped[list[str]] = mapped_column(JSON)
    notes: Mapped[list[str]] = mapped_column(JSON)
    # live processes mapping exactly these bytes (a host scanned with --runtime)
    loaded_processes: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    loaded_containers: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    loaded_deleted: Mapped[bool] = mapped_column(Boolean, server_default=false())
    #: bytes only processes hold (deleted, replaced, a container's own file)
    loaded_copy: Mapped[bool] = mapped_column(Boolean, server_default=false())
    #: a loaded copy's drift: the other file at its path now
    disk_sha256: Mapped[str | None] = mapped_column(String(64))
    loaded_by: Mapped[list[dict[str, Any]]] = mapped_column(JSON, server_default=text("'[]'"))


class AssetLibrary(Base):
    """Current state: one row per (asset, family, version, CUDA major) of the latest scan."""

    __tablename__ = "asset_library"
    # asset_id in the key: where-used counts and pages assets from the index alone
    __table_args__ = (
        Index(None, "family", "version_key", "asset_id"),
        # drift's version spread: grouped in index order, no sort
        Index(None, "family", "version", "asset_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), index=True
    )
    asset_kind: Mapped[str] = mapped_column(String(16))
    family: Mapped[str] = mapped_column(String(64))
    version: Mapped[str | None] = mapped_column(String(128))
    version_key: Mapped[str | None] = mapped_column(SortKey)
    cuda_major: Mapped[int | None] = mapped_column(Integer)
    file_count: Mapped[int] = mapped_column(Integer)


class LibraryDigest(Base):
    """Fleet-wide current state, kept at ingest: per (family, component, version, CUDA major,
    arch, digest) of the current files with a digest and a version, how many assets hold it,
    in ``fleet.STRIPES`` rows by asset id (an asset counts in the row of its id modulo
    STRIPES), so that concurrent ingests of assets sharing libraries seldom wait on one row.
    Digest conflicts (a library seen with more than one digest) are the groups with more than
    one digest: a few thousand rows instead of every current file. Ingest applies each asset's
    change (the pairs its new latest scan adds and drops) in key order; rows go at 0."""

    __tablename__ = "library_digest"
    __table_args__ = (
        # the distinct (library, digest) pairs in index order (no sort), one family's from
        # its range
        Index(
            "ix_library_digest_group",
            "family",
            "component",
            "version",
            "cuda_major",
            "arch",
            "sha256",
        ),
    )

    #: SHA-256 of the row's identity (`app.storage.repositories.fleet.digest_key`): a primary
    #: key for the upsert, whatever columns are NULL
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    stripe: Mapped[int] = mapped_column(Integer, primary_key=True)
    family: Mapped[str] = mapped_column(String(64))
    component: Mapped[str | None] = mapped_column(String(128))
    version: Mapped[str] = mapped_column(String(128))
    cuda_major: Mapped[int | None] = mapped_column(Integer)
    arch: Mapped[str | None] = mapped_column(String(32))
    sha256: Mapped[str] = mapped_column(String(64))
    assets: Mapped[int] = mapped_column(Integer)


class LibraryVersion(Base):
    """Fleet-wide current state, kept at ingest as `LibraryDigest` is (striped the same way):
    how many assets hold each (family, version) in their latest scan (the summary's distinct
    assets per family and version): drift's version spread and the overview's version charts."""

    __tablename__ = "library_version"
    __table_args__ = (Index("ix_library_version_family_version", "family", "version", "assets"),)

    #: SHA-256 of (family, version) (`app.storage.repositories.fleet.digest_key`)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    stripe: Mapped[int] = mapped_column(Integer, primary_key=True)
    family: Mapped[str] = mapped_column(String(64))
    version: Mapped[str | None] = mapped_column(String(128))
    assets: Mapped[int] = mapped_column(Integer)


class AssetFileVerdicts(Base):
    """Current state per asset, kept at ingest and by provenance re-evaluation: the verdict
    counts of the asset's current library files (``kind = 'file'``). The overview's fleet
    verdict shares are their sums (one row per asset instead of every current file)."""

    __tablename__ = "asset_file_verdicts"

    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    files: Mapped[int] = mapped_column(Integer)
    integrity_verified: Mapped[int] = mapped_column(Integer)
    provenance_verified: Mapped[int] = mapped_column(Integer)
    modified: Mapped[int] = mapped_column(Integer)
    unowned: Mapped[int] = mapped_column(Integer)
    provenance_conflict: Mapped[int] = mapped_column(Integer)


class TrustPolicyVersion(Base):
    """One version of the service's trust policy (YAML as received); the highest is current."""

    __tablename__ = "trust_policy"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, unique=True)
    document: Mapped[str] = mapped_column(Text)
    content_sha256: Mapped[str] = mapped_column(String(64))
    #: the trusted signers as described in verdicts, for display
    signers: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str | None] = mapped_column(String(128))
    token_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("api_token.id", ondelete="SET NULL")
    )


class ReferenceCatalog(Base):
    """A signed reference catalog as imported (gzip), with what its last verification found.

    ``active`` is false while the current trust policy does not trust its signature or signer;
    its entries then take no part in verdicts (they come back when a later policy trusts it).
    """

    __tablename__ = "reference_catalog"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    content_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    format: Mapped[str] = mapped_column(String(32))  # "dsse" | "sigstore-bundle"
    signer: Mapped[str | None] = mapped_column(Text)
    entry_count: Mapped[int] = mapped_column(Integer)
    out_of_scope: Mapped[int] = mapped_column(Integer)
    active: Mapped[bool] = mapped_column(Boolean)
    rejected_reason: Mapped[str | None] = mapped_column(Text)
    policy_version: Mapped[int] = mapped_column(Integer)
    imported_at: Mapped[datetime] = mapped_column(UTCDateTime)
    verified_at: Mapped[datetime] = mapped_column(UTCDateTime)
    imported_by: Mapped[str | None] = mapped_column(String(128))
    token_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("api_token.id", ondelete="SET NULL")
    )
    gzip_data: Mapped[bytes] = mapped_column(LargeBinary)


class CatalogEntryRow(Base):
    """One file a catalog vouches for (only entries inside its signer's scope are kept)."""

    __tablename__ = "catalog_entry"
    __table_args__ = (UniqueConstraint("catalog_id", "position"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    catalog_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("reference_catalog.id", ondelete="CASCADE")
    )
    #: order inside the catalog: the first listed entry decides a verdict, as in the scanner
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    #: file name part of ``name``: a file can only conflict by path with an entry of its name
    basename: Mapped[str] = mapped_column(String(255))
    sha256: Mapped[str] = mapped_column(String(64))
    family: Mapped[str | None] = mapped_column(String(64))
    component: Mapped[str | None] = mapped_column(String(128))
    version: Mapped[str | None] = mapped_column(String(128))
    cuda_major: Mapped[int | None] = mapped_column(Integer)
    arch: Mapped[str | None] = mapped_column(String(32))
    package: Mapped[str | None] = mapped_column(Text)


class PromotionPolicyVersion(Base):
    """One version of a named promotion policy (YAML as received); the highest is current."""

    __tablename__ = "promotion_policy"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    version: Mapped[int] = mapped_column(Integer)
    document: Mapped[str] = mapped_column(Text)
    content_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str | None] = mapped_column(String(128))
    token_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("api_token.id", ondelete="SET NULL")
    )


class GateDecision(Base):
    """The audit record of one gate decision: who asked, about what, under which policy
    version, and the answer with its reasons. Kept when the asset or token goes."""

    __tablename__ = "gate_decision"
    __table_args__ = (
        Index(None, "decided_at"),
        Index(None, "policy_name", "decided_at"),
        Index(None, "subject_digest", "decided_at"),
        # an asset's decisions, and the latest under each policy (max id per asset and policy)
        Index(None, "asset_id", "policy_name", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    decided_at: Mapped[datetime] = mapped_column(UTCDateTime)
    token_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("api_token.id", ondelete="SET NULL")
    )
    token_name: Mapped[str] = mapped_column(String(128))
    policy_name: Mapped[str] = mapped_column(String(128))
    policy_version: Mapped[int] = mapped_column(Integer)
    policy_sha256: Mapped[str] = mapped_column(String(64))
    decision: Mapped[str] = mapped_column(String(8))
    subject_kind: Mapped[str] = mapped_column(String(16))
    subject_name: Mapped[str] = mapped_column(String(1024))
    subject_digest: Mapped[str | None] = mapped_column(String(255))
    asset_id: Mapped[int | None] = mapped_column(BigId, ForeignKey("asset.id", ondelete="SET NULL"))
    scan_id: Mapped[int | None] = mapped_column(BigId, ForeignKey("scan.id", ondelete="SET NULL"))
    reasons: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    controls: Mapped[dict[str, str]] = mapped_column(JSON)
    #: a CI job's decision: the trust rule and the token claims it was granted on
    granted: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class ComplianceAsset(Base):
    """An asset's latest scan evaluated under the current version of a policy."""

    __tablename__ = "compliance_asset"

    policy_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    policy_version: Mapped[int] = mapped_column(Integer)
    scan_id: Mapped[int | None] = mapped_column(BigId, ForeignKey("scan.id", ondelete="SET NULL"))
    decision: Mapped[str] = mapped_column(String(8))
    #: when the evaluated scan ran: scan_age is judged against it when compliance is read
    scanned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    evaluated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: every rule's result (rule, action, status, message, files, evidence, controls)
    results: Mapped[list[dict[str, Any]]] = mapped_column(JSON)


class ComplianceControl(Base):
    """One control's status for one asset under a policy, without the time-dependent scan_age
    rule (applied when read, from ``scanned_at``). The index answers per-control counts."""

    __tablename__ = "compliance_control"
    __table_args__ = (Index(None, "policy_name", "control_id", "status", "scanned_at"),)

    policy_name: Mapped[str] = mapped_column(String(128), primary_key=True)
    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    control_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    scanned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class NodeContainer(Base):
    """A container running on a host as its latest report says, linked to the image it runs by
    the image asset's identity (manifest digest, else ``config:`` + config digest); the
    indexes answer "which hosts run this image"."""

    __tablename__ = "node_container"
    __table_args__ = (Index(None, "image_digest"), Index(None, "image_config"))

    host_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    engine: Mapped[str] = mapped_column(String(16), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    container_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    image_name: Mapped[str] = mapped_column(String(1024))
    image_digest: Mapped[str | None] = mapped_column(String(80))
    image_config: Mapped[str | None] = mapped_column(String(80))


class NodeGpu(Base):
    """A GPU of a host as its latest report lists it (a CycloneDX ``device`` component); the
    model index answers "which hosts have this GPU"."""

    __tablename__ = "node_gpu"
    __table_args__ = (Index(None, "model"),)

    host_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    bus_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    model: Mapped[str] = mapped_column(String(256))
    uuid: Mapped[str | None] = mapped_column(String(64))
    minor: Mapped[int | None] = mapped_column(Integer)
    vbios: Mapped[str | None] = mapped_column(String(64))
    architecture: Mapped[str | None] = mapped_column(String(64))
    compute_capability: Mapped[str | None] = mapped_column(String(8))


class NodeInjected(Base):
    """A host file the NVIDIA Container Toolkit injects into the host's containers (CDI specs,
    ``nvidia-container-cli list``), as the host's latest report lists it: what a container on
    the host runs besides its image (``libcuda.so.*``, ``libnvidia-ml.so.*``)."""

    __tablename__ = "node_injected"
    __table_args__ = (Index(None, "sha256"),)

    host_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    host_path: Mapped[str] = mapped_column(String(1024), primary_key=True)
    sha256: Mapped[str | None] = mapped_column(String(64))
    family: Mapped[str | None] = mapped_column(String(64))
    version: Mapped[str | None] = mapped_column(String(128))
    container_paths: Mapped[list[str]] = mapped_column(JSON)
    devices: Mapped[list[str]] = mapped_column(JSON)
    sources: Mapped[list[str]] = mapped_column(JSON)


class AdvisoryDocument(Base):
    """The current revision of one advisory document (CSAF, OSV, CVE Record), identified by
    its publisher's namespace and tracking id, with where it came from and its digest."""

    __tablename__ = "advisory_document"
    __table_args__ = (UniqueConstraint("publisher_namespace", "tracking_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    format: Mapped[str] = mapped_column(String(16))
    publisher_namespace: Mapped[str] = mapped_column(String(512))
    publisher_name: Mapped[str] = mapped_column(String(256))
    tracking_id: Mapped[str] = mapped_column(String(256))
    version: Mapped[str] = mapped_column(String(64))
    #: final, draft or interim (CSAF); a draft or interim never replaces a final revision
    status: Mapped[str] = mapped_column(String(16))
    title: Mapped[str | None] = mapped_column(Text)
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    content_sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    #: the file path, URL or API caller the revision came from
    source: Mapped[str] = mapped_column(String(2048))
    #: the .sha256 published beside it did not match (imported anyway, marked)
    digest_mismatch: Mapped[bool] = mapped_column(Boolean, server_default=false())
    imported_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: when an import last read this document from its publisher, changed or not (the feed's
    #: age for the advisories rule: an unchanged sync keeps it fresh)
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: the revision this one replaced (None for the first)
    previous_version: Mapped[str | None] = mapped_column(String(64))


class AdvisoryVulnerability(Base):
    """A vulnerability as one document states it; the CVE index joins its bulletins."""

    __tablename__ = "advisory_vulnerability"
    __table_args__ = (UniqueConstraint("document_id", "cve"), Index(None, "cve"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    document_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("advisory_document.id", ondelete="CASCADE")
    )
    #: the CVE id (or the document's own id where it names no single CVE)
    cve: Mapped[str] = mapped_column(String(64))
    aliases: Mapped[list[str]] = mapped_column(JSON)
    title: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    #: of the highest score among its products (LOW, MEDIUM, HIGH, CRITICAL)
    severity: Mapped[str | None] = mapped_column(String(16))
    cvss: Mapped[float | None] = mapped_column(Float)
    cvss_vector: Mapped[str | None] = mapped_column(String(256))
    cwe: Mapped[str | None] = mapped_column(String(32))
    published_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: set when a newer revision of the document no longer lists it
    withdrawn_reason: Mapped[str | None] = mapped_column(Text)


class AdvisoryProductStatus(Base):
    """One product's status for one vulnerability: the version text as written and parsed
    (``needs_review`` when it did not parse or parsed with a reason for a person)."""

    __tablename__ = "advisory_product_status"
    __table_args__ = (Index(None, "vulnerability_id"), Index(None, "product"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    vulnerability_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("advisory_vulnerability.id", ondelete="CASCADE")
    )
    product_id: Mapped[str] = mapped_column(String(512))
    product: Mapped[str] = mapped_column(String(256))
    #: the CSAF product_status list it is in (known_affected, fixed, known_not_affected, ...)
    status: Mapped[str] = mapped_column(String(32))
    platform: Mapped[str | None] = mapped_column(String(256))
    version_text: Mapped[str | None] = mapped_column(Text)
    parsed: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    needs_review: Mapped[bool] = mapped_column(Boolean)
    vers: Mapped[list[str]] = mapped_column(JSON)
    cpe: Mapped[str | None] = mapped_column(String(512))
    purls: Mapped[list[str]] = mapped_column(JSON)
    hashes: Mapped[list[list[str]]] = mapped_column(JSON)
    justification: Mapped[str | None] = mapped_column(String(64))
    remediations: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    severity: Mapped[str | None] = mapped_column(String(16))
    cvss: Mapped[float | None] = mapped_column(Float)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: why a newer revision closed it ("dropped by revision 2.0.0 of 5703")
    closed_reason: Mapped[str | None] = mapped_column(Text)


class AssetProduct(Base):
    """Current state: the NVIDIA products (``gpuprov:product:*`` components) of an asset's
    latest scan, which the advisory matcher reads."""

    __tablename__ = "asset_product"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), index=True
    )
    #: the product table's key (scanner/detect/products.py): cuda-toolkit, cuobjdump, driver
    key: Mapped[str] = mapped_column(String(64))
    version: Mapped[str | None] = mapped_column(String(128))
    #: a toolkit part's CUDA Toolkit release ("12.4.1")
    toolkit: Mapped[str | None] = mapped_column(String(64))
    #: a toolkit known only by its release line ("12.4")
    line: Mapped[str | None] = mapped_column(String(32))
    #: a driver's branch ("R535")
    branch: Mapped[str | None] = mapped_column(String(16))
    paths: Mapped[list[str]] = mapped_column(JSON)
    sha256: Mapped[str | None] = mapped_column(String(64))
    owner: Mapped[str | None] = mapped_column(Text)


class AssetCondition(Base):
    """Current state: a condition fact of a host's latest report (``gpuprov:condition:*``: CDI
    mode, where ldconfig runs, vGPU guest, GPU architecture), which the advisory matcher decides
    bulletins' conditions by. Only the host's own report sets them; an image has none, and an
    undecided condition has no row (never a default)."""

    __tablename__ = "asset_condition"

    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    #: scanner/advisories/conditions.py: cdi_mode, ldconfig_from_container, vgpu_guest, ...
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    #: "true", "false", or several joined by "|" ("false|true": either can happen)
    value: Mapped[str] = mapped_column(String(640))
    #: where the host read it ('/etc/nvidia-container-runtime/config.toml: mode = "cdi"')
    source: Mapped[str | None] = mapped_column(Text)


class AdvisoryStack(Base):
    """A distinct set of matcher inputs (products, CUDA Toolkit library families, condition
    facts) that assets hold: matched once against the feed, its findings shared by every asset
    holding it."""

    __tablename__ = "advisory_stack"

    #: SHA-256 of the inputs (`app.domain.vulnerabilities.stack_key`)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    matched_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: the feed it was matched against: its newest import and its number of documents
    feed_imported_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    feed_documents: Mapped[int] = mapped_column(Integer)


class AdvisoryFinding(Base):
    """One matcher answer per (stack, CVE, product found); an asset's are its stack's
    (docs/advisories.md, "Matching")."""

    __tablename__ = "advisory_finding"
    __table_args__ = (Index(None, "stack", "cve"), Index(None, "cve", "status", "stack"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    stack: Mapped[str] = mapped_column(
        String(64), ForeignKey("advisory_stack.key", ondelete="CASCADE")
    )
    cve: Mapped[str] = mapped_column(String(64))
    #: affected, not_affected, fixed or under_investigation
    status: Mapped[str] = mapped_column(String(24))
    #: a not_affected answer's OpenVEX justification
    justification: Mapped[str | None] = mapped_column(String(64))
    product: Mapped[str] = mapped_column(String(64))
    component: Mapped[str | None] = mapped_column(String(128))
    installed: Mapped[str | None] = mapped_column(String(256))
    affected_text: Mapped[str | None] = mapped_column(Text)
    fixed_in: Mapped[str | None] = mapped_column(Text)
    #: why a person must decide (an affected answer that is not a proof)
    review: Mapped[str | None] = mapped_column(Text)
    inferred: Mapped[bool] = mapped_column(Boolean)
    conditions_unevaluated: Mapped[list[str]] = mapped_column(JSON)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON)


class AssetAdvisoryMatch(Base):
    """Current state: the stack an asset's latest scan holds (the where-used index of
    advisory findings)."""

    __tablename__ = "asset_advisory_match"
    __table_args__ = (Index(None, "stack", "asset_id"),)

    asset_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("asset.id", ondelete="CASCADE"), primary_key=True
    )
    stack: Mapped[str] = mapped_column(String(64), ForeignKey("advisory_stack.key"))


class AdvisoryAnalysis(Base):
    """A person's (or an imported VEX statement's) analysis of one CVE on one asset, or on the
    assets a label selector names: an OpenVEX status with its justification, detail and expiry,
    who wrote it and from where (docs/advisories.md, "Triage")."""

    __tablename__ = "advisory_analysis"
    __table_args__ = (Index(None, "cve", "asset_id"), Index(None, "asset_id"))

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    cve: Mapped[str] = mapped_column(String(64))
    #: the one asset it is about; None: the assets ``selector`` names
    asset_id: Mapped[int | None] = mapped_column(BigId, ForeignKey("asset.id", ondelete="CASCADE"))
    #: label -> value, every one of which an asset must carry; None: ``asset_id``'s asset
    selector: Mapped[dict[str, str] | None] = mapped_column(JSON)
    #: not_affected, affected, fixed or under_investigation (OpenVEX v0.2.0)
    state: Mapped[str] = mapped_column(String(24))
    #: an OpenVEX justification (not_affected)
    justification: Mapped[str | None] = mapped_column(String(64))
    #: why, in words (OpenVEX's impact or action statement)
    detail: Mapped[str | None] = mapped_column(Text)
    #: when it stops applying; None: until withdrawn
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: the authenticated principal that wrote it (a token's name, a person's email) or the
    #: author a VEX document names; never a request body's own claim
    author: Mapped[str] = mapped_column(String(256))
    #: where it came from: ``api``, ``web``, ``vex:openvex:<document id>``...
    source: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class WebhookEndpoint(Base):
    """A webhook endpoint (docs/webhooks.md): where events of the types it names are posted,
    signed as the Standard Webhooks specification says with its own secret."""

    __tablename__ = "webhook_endpoint"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    url: Mapped[str] = mapped_column(String(2048))
    #: the event types it receives (``gate.denied``, ...)
    events: Mapped[list[str]] = mapped_column(JSON)
    #: ``{"min_severity": str | None, "labels": {name: value}}``
    filter: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: ``whsec_<base64>``: kept as is, since signing needs the key itself (not a hash); the API
    #: shows it only in the answer that made it
    secret: Mapped[str] = mapped_column(String(128))
    #: the secret before the last rotation, still signing (a second signature) until its end
    previous_secret: Mapped[str | None] = mapped_column(String(128))
    previous_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: set when deliveries stopped (the receiver answered 410 Gone); None: delivering
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    disabled_reason: Mapped[str | None] = mapped_column(Text)


class WebhookDelivery(Base):
    """The outbox: one event for one endpoint, written in the transaction of the change it
    reports and delivered by the worker (app/domain/webhook_delivery.py) until the endpoint
    answers 2xx, answers 410, or the attempts run out (``dead``)."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (
        UniqueConstraint("endpoint_id", "message_id"),
        Index(None, "status", "next_attempt_at"),
        Index(None, "endpoint_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    endpoint_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("webhook_endpoint.id", ondelete="CASCADE")
    )
    #: the ``webhook-id`` header: one per event, the same on every retry (the receiver's
    #: idempotency key)
    message_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(64))
    #: the exact body posted (and signed)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: pending, delivered, dead (attempts exhausted) or cancelled (the endpoint answered 410)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    #: when it is due (a claimed row is due again after the claim's lease: a worker that died
    #: mid-delivery leaves it to the next)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: the HTTP status of the last attempt (None: no answer)
    last_status: Mapped[int | None] = mapped_column(Integer)
    #: why the last attempt failed, in the service's words (never the receiver's body)
    last_error: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


#: a proposal still in play: at most one per (asset, CVE) (the partial unique index's predicate)
PROPOSAL_OPEN = "status IN ('proposed', 'accepted')"


class RuntimeProposal(Base):
    """Runtime evidence on a host scanned with ``--runtime``: an affected finding whose library
    files no process mapped over the observed window, proposed as not_affected /
    vulnerable_code_not_in_execute_path for a person to accept (then ``analysis_id`` is the
    analysis recorded) or dismiss; withdrawn by the service when a report shows a file loaded
    (docs/advisories.md, "Runtime evidence")."""

    __tablename__ = "runtime_proposal"
    __table_args__ = (
        Index(None, "asset_id", "cve"),
        Index(
            "uq_runtime_proposal_open",
            "asset_id",
            "cve",
            unique=True,
            postgresql_where=text(PROPOSAL_OPEN),
            sqlite_where=text(PROPOSAL_OPEN),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    asset_id: Mapped[int] = mapped_column(BigId, ForeignKey("asset.id", ondelete="CASCADE"))
    cve: Mapped[str] = mapped_column(String(64))
    #: the product found whose files the evidence is about (nvjpeg, tensorrt, ...)
    product: Mapped[str] = mapped_column(String(64))
    #: ``[{"path": ..., "sha256": ...}]``: the library files of the affected findings
    files: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    #: proposed, accepted, dismissed or withdrawn
    status: Mapped[str] = mapped_column(String(16))
    #: the first and latest --runtime report (their scanned_at) that saw the files unmapped
    window_start: Mapped[datetime] = mapped_column(UTCDateTime)
    window_end: Mapped[datetime] = mapped_column(UTCDateTime)
    #: how many such reports, and the fewest and most processes' maps one of them read
    observations: Mapped[int] = mapped_column(Integer)
    processes_min: Mapped[int] = mapped_column(Integer)
    processes_max: Mapped[int] = mapped_column(Integer)
    first_scan_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("scan.id", ondelete="SET NULL")
    )
    last_scan_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("scan.id", ondelete="SET NULL")
    )
    #: the expiry an accepted analysis gets: the window's end plus GPUPROV_RUNTIME_PROPOSAL_DAYS
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    #: when and by whom it was accepted or dismissed
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_by: Mapped[str | None] = mapped_column(String(256))
    #: the analysis an acceptance recorded
    analysis_id: Mapped[int | None] = mapped_column(
        BigId, ForeignKey("advisory_analysis.id", ondelete="SET NULL")
    )
    withdrawn_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: why it was withdrawn (the service's words) or dismissed (the person's, if given)
    reason: Mapped[str | None] = mapped_column(Text)
