"""The promotion policy document (``kind: PromotionPolicy``): schema, loading, identity.

A policy is read at a boundary (a YAML file, an API body), so it is validated with pydantic
and every error names the field path and why. Version expressions are checked here, with
the one version rule of scanner/versions.py, so evaluation never meets a bad one.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from scanner.detect.classifiers import CLASSIFIERS
from scanner.errors import ScannerError
from scanner.loaders import DocumentError, load_yaml
from scanner.versions import parse_version_filter

API_VERSION = "gpuprov.dev/v1"
KIND = "PromotionPolicy"
#: Families a policy may name: the scanner's classifier table (a typo is an error, not a no-op).
FAMILIES = frozenset(c.family for c in CLASSIFIERS)


class PolicyError(ScannerError):
    """A policy document that cannot be used; the message names each bad field, and
    ``errors`` holds each as (field path, why) for callers that answer them one by one."""

    def __init__(self, message: str, errors: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors


class Action(StrEnum):
    DENY = "deny"
    WARN = "warn"


class Forbidden(StrEnum):
    MODIFIED = "modified"
    NO_RECORD = "no-record"
    UNOWNED = "unowned"


class LoadedKind(StrEnum):
    """What the ``loaded`` rule may forbid (the ``--runtime`` finding kinds)."""

    UNOWNED = "loaded-unowned"
    DELETED = "loaded-deleted"
    DIFFERS = "loaded-differs-from-disk"


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action = Action.DENY


def _check_family(name: str) -> str:
    if name not in FAMILIES:
        raise ValueError(f"unknown library family {name!r}; known: {', '.join(sorted(FAMILIES))}")
    return name


def _check_expression(expr: str) -> str:
    parse_version_filter(expr)  # ValueError names what is wrong
    return expr


class IntegrityRule(_Rule):
    forbid: list[Forbidden] = Field(default_factory=lambda: [Forbidden.MODIFIED], min_length=1)


class OwnershipRule(_Rule):
    allow_unowned: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @field_validator("allow_unowned")
    @classmethod
    def _absolute(cls, globs: list[str]) -> list[str]:
        for g in globs:
            if not g.startswith("/"):
                raise ValueError(f"{g!r} is not an absolute path glob (like /opt/vendor/**)")
        return globs


class ProvenanceRule(_Rule):
    require: Literal["verified"] | None = None
    signers: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)


def _check_minimum(version: str) -> str:
    if version.strip()[:1] in "<>=!" or version.strip().endswith("*"):
        raise ValueError(f"minimum {version!r} must be a plain version (like 12.2)")
    if parse_version_filter(version).lower is None:
        raise ValueError(f"{version!r} is not a numeric version (like 12.2)")
    return version


Family = Annotated[str, AfterValidator(_check_family)]
VersionExpression = Annotated[str, AfterValidator(_check_expression)]
MinimumVersion = Annotated[str, AfterValidator(_check_minimum)]


class VersionsRule(_Rule):
    allow: dict[Family, VersionExpression] = Field(default_factory=dict)
    deny: dict[Family, list[VersionExpression]] = Field(default_factory=dict)
    minimum: dict[Family, MinimumVersion] = Field(default_factory=dict)


class LoadedRule(_Rule):
    forbid: list[LoadedKind] = Field(default_factory=lambda: list(LoadedKind), min_length=1)


class EmptyRule(_Rule):
    """A rule with nothing to configure but its action."""


class DriverRule(_Rule):
    #: CUDA's minor-version compatibility: a CUDA X.Y runtime runs on a driver of the same major
    #: that supports an older X.Z (without PTX JIT of newer code). False: the runtime in use
    #: must not be newer than the newest CUDA the driver supports.
    minor_version_compatibility: bool = True


class ImageSignatureRule(_Rule):
    signers: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)


class SlsaRule(_Rule):
    min_level: int = Field(default=1, ge=1, le=3, strict=True)


#: the longest scan age a policy may allow, 100 years: "now - max_hours" must stay a date
MAX_SCAN_AGE_HOURS = 876_000


class ScanAgeRule(_Rule):
    # strict: a number, never true (1) or a string
    max_hours: float = Field(gt=0, le=MAX_SCAN_AGE_HOURS, allow_inf_nan=False, strict=True)


class ParityRule(_Rule):
    label: str = Field(min_length=1)
    baseline: str = Field(min_length=1)
    target: str = Field(min_length=1)


class Severity(StrEnum):
    """A CVSS qualitative severity rating (CVSS v3.1 specification, section 5), lowest first."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


#: a CVE id (CVE-2025-23280) or another advisory id a feed uses (GHSA-..., an OSV id)
_ADVISORY_ID = re.compile(r"[A-Z][A-Z0-9]{1,15}-[A-Za-z0-9][A-Za-z0-9._:-]{0,62}")


def _check_advisory_id(value: str) -> str:
    if not _ADVISORY_ID.fullmatch(value):
        raise ValueError(f"{value[:80]!r} is not an advisory id (like CVE-2025-23280)")
    return value


def _expiry(value: object) -> datetime:
    """An expiry: a date (the ignore stops applying at 00:00 UTC that day) or a date and time
    with its time zone; a time without a zone is refused rather than guessed."""
    if isinstance(value, str):
        text = value
        try:
            value = (
                date.fromisoformat(text)
                if len(text) == 10
                else datetime.fromisoformat(text.replace("Z", "+00:00"))
            )
        except ValueError:
            raise ValueError(
                f"{text[:40]!r} is not a date (2027-01-31) or a date and time with its time "
                "zone (2027-01-31T12:00:00Z)"
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("give the expiry's time zone (2027-01-31T12:00:00Z), or a date")
        return value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise ValueError("must be a date (2027-01-31) or a date and time with its time zone")


AdvisoryId = Annotated[str, Field(max_length=64), AfterValidator(_check_advisory_id)]
Expiry = Annotated[datetime, BeforeValidator(_expiry)]


class AdvisoryIgnore(BaseModel):
    """An accepted risk: one advisory left out of the rule, with why and until when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cve: AdvisoryId
    reason: str = Field(min_length=1, max_length=1024)
    expires: Expiry

    @field_validator("reason")
    @classmethod
    def _named(cls, reason: str) -> str:
        if not reason.strip():
            raise ValueError("name the reason the risk is accepted (not only spaces)")
        return reason


class AdvisoriesRule(_Rule):
    """Known vulnerabilities (scanner/policy/advisory_rule.py, docs/policy.md)."""

    min_severity: Severity
    ignore: list[AdvisoryIgnore] = Field(default_factory=list, max_length=1000)
    # strict: a boolean, never "yes" or 1
    require_fix_available: bool = Field(default=False, strict=True)
    #: None: the feed's age is not checked
    max_feed_age_hours: float | None = Field(
        default=None, gt=0, le=MAX_SCAN_AGE_HOURS, allow_inf_nan=False, strict=True
    )

    @field_validator("ignore")
    @classmethod
    def _once(cls, ignore: list[AdvisoryIgnore]) -> list[AdvisoryIgnore]:
        seen: set[str] = set()
        for entry in ignore:
            if entry.cve in seen:
                raise ValueError(f"{entry.cve} is ignored twice: keep one entry")
            seen.add(entry.cve)
        return ignore


class Rules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    integrity: IntegrityRule | None = None
    ownership: OwnershipRule | None = None
    provenance: ProvenanceRule | None = None
    versions: VersionsRule | None = None
    cuda_pairing: EmptyRule | None = None
    mixed_cudnn: EmptyRule | None = None
    duplicates: EmptyRule | None = None
    driver: DriverRule | None = None
    loaded: LoadedRule | None = None
    image_signature: ImageSignatureRule | None = None
    slsa: SlsaRule | None = None
    scan_age: ScanAgeRule | None = None
    parity: ParityRule | None = None
    advisories: AdvisoriesRule | None = None


#: Rule ids in evaluation and report order (the field order of `Rules`).
RULE_IDS: tuple[str, ...] = tuple(Rules.model_fields)


class PromotionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_version: Literal["gpuprov.dev/v1"] = Field(alias="apiVersion")
    kind: Literal["PromotionPolicy"]
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    rules: Rules


class LoadedPolicy(BaseModel):
    """A validated policy with its identity: name, version (service revision) and sha256."""

    model_config = ConfigDict(frozen=True)

    policy: PromotionPolicy
    sha256: str
    version: str | None = None

    def ref(self) -> dict[str, Any]:
        return {"name": self.policy.name, "version": self.version, "sha256": self.sha256}


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":
            continue  # a bad dict key: the key itself is already the last path element
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def _why(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _model_field_path(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    # pydantic puts the union member / model name into the path ("rules.integrity.IntegrityRule")
    return tuple(p for p in loc if not (isinstance(p, str) and p[:1].isupper() and "Rule" in p))


def validate_policy(doc: object) -> PromotionPolicy:
    """A `PromotionPolicy` from parsed YAML/JSON; raises PolicyError naming each bad field."""
    if not isinstance(doc, dict):
        raise PolicyError("policy: the document must be a mapping (apiVersion, kind, name, rules)")
    try:
        return PromotionPolicy.model_validate(doc)
    except ValidationError as e:
        errors = tuple(
            (_path(_model_field_path(tuple(err["loc"]))), _why(err)) for err in e.errors()
        )
        lines = [f"{where}: {why}" for where, why in errors]
        raise PolicyError("invalid policy: " + "; ".join(lines), errors) from None


def load_policy(raw: bytes, version: str | None = None) -> LoadedPolicy:
    """Parse and validate a policy document (YAML or JSON bytes) with the limits of
    `scanner.loaders.load_yaml`; sha256 is of these bytes."""
    try:
        doc = load_yaml(raw)
    except DocumentError as e:
        raise PolicyError(f"policy is not YAML: {e}") from None
    policy = validate_policy(doc)
    return LoadedPolicy(policy=policy, sha256=hashlib.sha256(raw).hexdigest(), version=version)
