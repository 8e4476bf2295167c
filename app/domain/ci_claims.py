"""CI trust rules: which claims of a CI provider's OIDC ID token grant which rights.

Modelled on PyPI's trusted publishers. A rule names one issuer and the claims a token must
carry; claims are typed per provider, and a rule must pin the provider's immutable numeric
ids (GitHub ``repository_owner_id`` and ``repository_id``, GitLab ``namespace_id`` and
``project_id``): names can be deleted and registered again by someone else. Globs are
allowed on refs only, anchored, and ``*`` never crosses ``/``. ``sub`` is never parsed: both
providers let a repository choose its format.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from app.domain.tokens import checked_asset_patterns, checked_policy_limits
from app.errors import BadRequest

Provider = Literal["github", "gitlab"]

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
GITLAB_ISSUER = "https://gitlab.com"

#: the claims a rule may name, per provider; the first ones are required on every rule
_GITHUB_REQUIRED = ("repository_owner_id", "repository_id")
_GITHUB_CLAIMS = frozenset(
    {
        *_GITHUB_REQUIRED,
        "repository",
        "repository_owner",
        "ref",
        "ref_type",
        "ref_protected",
        "environment",
        # the called reusable workflow (what the job runs) vs the caller's workflow
        "job_workflow_ref",
        "workflow_ref",
        "event_name",
        "runner_environment",
    }
)
_GITLAB_REQUIRED = ("namespace_id", "project_id")
_GITLAB_CLAIMS = frozenset(
    {
        *_GITLAB_REQUIRED,
        "namespace_path",
        "project_path",
        "ref",
        "ref_type",
        "ref_path",
        "ref_protected",
        "environment",
        "environment_protected",
        "ci_config_ref_uri",
        "pipeline_source",
    }
)
_CLAIMS: dict[Provider, frozenset[str]] = {"github": _GITHUB_CLAIMS, "gitlab": _GITLAB_CLAIMS}
_REQUIRED: dict[Provider, tuple[str, ...]] = {
    "github": _GITHUB_REQUIRED,
    "gitlab": _GITLAB_REQUIRED,
}
#: the only claims whose rule value may hold ``*``
_GLOB_CLAIMS = frozenset({"ref", "ref_path"})
#: what a CI token may be granted: never admin, never inventory reads
CI_SCOPES = frozenset({"gate", "report:write"})
#: the claims a gate decision records beside the rule that matched (what it was granted on)
RECORDED_CLAIMS = (
    "iss",
    "sub",
    "jti",
    "repository",
    "repository_id",
    "repository_owner_id",
    "ref",
    "sha",
    "environment",
    "workflow_ref",
    "job_workflow_ref",
    "run_id",
    "project_path",
    "project_id",
    "namespace_id",
    "ref_path",
    "pipeline_id",
    "job_id",
)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_NUMERIC = re.compile(r"[0-9]{1,20}")
_MAX_VALUE = 512


def provider_of(issuer: str) -> Provider | None:
    """The provider a known issuer belongs to: GitHub.com and GitHub Enterprise Cloud's
    per-enterprise issuers, GitLab.com; None for others (a rule then names its provider)."""
    if issuer == GITHUB_ISSUER or issuer.startswith(GITHUB_ISSUER + "/"):
        return "github"
    if issuer == GITLAB_ISSUER:
        return "gitlab"
    return None


def check_issuer(issuer: str, *, allow_loopback: bool) -> str:
    """An issuer URL as OpenID discovery uses it: HTTPS, no query or fragment; plain HTTP only
    on a loopback host and only when ``allow_loopback`` (tests)."""
    parts = urlsplit(issuer)
    if parts.query or parts.fragment or parts.username or parts.password or not parts.hostname:
        raise BadRequest(f"issuer {issuer[:200]!r} must be a URL without query or credentials")
    if parts.scheme == "https":
        return issuer
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        if allow_loopback:
            return issuer
        raise BadRequest(
            f"issuer {issuer!r} is plain HTTP on loopback: allowed only with "
            "GPUPROV_ALLOW_LOOPBACK_ISSUERS=1 (tests)"
        )
    raise BadRequest(f"issuer {issuer[:200]!r} must be an https:// URL")


def ref_glob(pattern: str) -> re.Pattern[str]:
    """An anchored matcher of a ref pattern: ``*`` matches within one path segment."""
    return re.compile(
        "".join("[^/]*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", pattern))
    )


@dataclass(frozen=True, slots=True)
class CiTrustRule:
    """One rule: tokens of `issuer` for `audience` carrying every claim of `claims` get
    `scopes`, limited to asset name patterns `assets` and gate policies `policies`."""

    name: str
    issuer: str
    provider: Provider
    audience: str
    claims: Mapping[str, str]
    scopes: frozenset[str]
    assets: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    _globs: Mapping[str, re.Pattern[str]] = field(default_factory=dict, compare=False)

    def matches(self, issuer: str, token_claims: Mapping[str, Any]) -> bool:
        """Whether a verified token of `issuer` carries every claim this rule names."""
        if issuer != self.issuer:
            return False
        for key, want in self.claims.items():
            got = claim_text(token_claims.get(key))
            if got is None:
                return False
            glob = self._globs.get(key)
            if glob is not None:
                if glob.fullmatch(got) is None:
                    return False
            elif got != want:
                return False
        return True

    def as_dict(self) -> dict[str, Any]:
        """The rule as the API shows and stores it."""
        return {
            "name": self.name,
            "issuer": self.issuer,
            "provider": self.provider,
            "audience": self.audience,
            "claims": dict(self.claims),
            "scopes": sorted(self.scopes),
            "assets": list(self.assets),
            "policies": list(self.policies),
        }


def claim_text(value: Any) -> str | None:
    """A token claim as rules compare it: strings as they are, booleans as ``true``/``false``
    (GitLab sends ``ref_protected`` as a string, others may not), integers in decimal; None
    for anything else (a list or object never matches)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return None


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequest(f"{what} must be a list of strings")
    if len(value) > 100:
        raise BadRequest(f"{what} may hold at most 100 entries")
    return value


def build_rule(
    name: str, body: Mapping[str, Any], *, audience: str | None, allow_loopback: bool
) -> CiTrustRule:
    """A rule from its API body, checked: known claims for the provider, its immutable ids
    present and numeric, globs on refs only, scopes a CI token may hold, the configured
    audience (``GPUPROV_CI_AUDIENCE``)."""
    if not _NAME.fullmatch(name):
        raise BadRequest("a rule name is 1 to 128 letters, digits, '.', '_' or '-'")
    unknown = sorted(
        set(body) - {"issuer", "provider", "audience", "claims", "scopes", "assets", "policies"}
    )
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(unknown)} in a CI trust rule")
    if audience is None:
        raise BadRequest(
            "keyless CI is off: set GPUPROV_CI_AUDIENCE to the audience CI jobs request"
        )
    issuer = body.get("issuer")
    if not isinstance(issuer, str) or not issuer:
        raise BadRequest("issuer is required: the CI provider's OIDC issuer URL")
    issuer = check_issuer(issuer, allow_loopback=allow_loopback)
    given = body.get("provider")
    known = provider_of(issuer)
    if given is not None and given not in _CLAIMS:
        raise BadRequest("provider must be 'github' or 'gitlab'")
    if known is not None and given is not None and given != known:
        raise BadRequest(f"issuer {issuer} is {known}'s, not {given}'s")
    provider: Provider | None = known or given
    if provider is None:
        raise BadRequest(
            f"issuer {issuer} is not a known provider's: say which with provider "
            "(github for GitHub Enterprise Server, gitlab for a self-managed GitLab)"
        )
    rule_audience = body.get("audience", audience)
    if rule_audience != audience:
        raise BadRequest(
            f"audience must be the service's CI audience {audience!r} (GPUPROV_CI_AUDIENCE): "
            "never a provider's default audience"
        )
    claims = body.get("claims")
    if not isinstance(claims, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in claims.items()
    ):
        raise BadRequest("claims must be an object of claim names to strings")
    allowed = _CLAIMS[provider]
    for key in sorted(claims):
        if key not in allowed:
            raise BadRequest(
                f"claim {key!r} is not one a {provider} rule may name; known: "
                f"{', '.join(sorted(allowed))} ('sub' is never compared: its format varies)"
            )
        value = claims[key]
        if not value or len(value) > _MAX_VALUE:
            raise BadRequest(f"claim {key!r} needs a value of 1 to {_MAX_VALUE} characters")
        if "*" in value and key not in _GLOB_CLAIMS:
            raise BadRequest(f"claim {key!r} must match exactly: globs only on ref and ref_path")
    for key in _REQUIRED[provider]:
        if key not in claims:
            raise BadRequest(
                f"a {provider} rule must name {' and '.join(_REQUIRED[provider])}: names can be "
                "deleted and registered again by someone else, ids cannot"
            )
        if not _NUMERIC.fullmatch(claims[key]):
            raise BadRequest(f"claim {key!r} is a numeric id, not {claims[key][:80]!r}")
    scopes = _strings(body.get("scopes"), "scopes")
    if not scopes:
        raise BadRequest("scopes is required: gate, report:write or both")
    bad = sorted(set(scopes) - CI_SCOPES)
    if bad:
        raise BadRequest(f"a CI token may hold only gate and report:write, not {', '.join(bad)}")
    assets = checked_asset_patterns(_strings(body.get("assets"), "assets"), scopes)
    policies = checked_policy_limits(_strings(body.get("policies"), "policies"), scopes)
    globs = {k: ref_glob(v) for k, v in claims.items() if k in _GLOB_CLAIMS and "*" in v}
    return CiTrustRule(
        name,
        issuer,
        provider,
        audience,
        dict(sorted(claims.items())),
        frozenset(scopes),
        tuple(assets),
        tuple(policies),
        globs,
    )


def first_match(
    rules: Iterable[CiTrustRule], issuer: str, token_claims: Mapping[str, Any]
) -> CiTrustRule | None:
    """The first rule, by name, that a verified token matches (rules never combine: what a
    token may do is what one rule says)."""
    for rule in sorted(rules, key=lambda r: r.name):
        if rule.matches(issuer, token_claims):
            return rule
    return None


def recorded_claims(rule: CiTrustRule, token_claims: Mapping[str, Any]) -> dict[str, Any]:
    """What a decision or report records of the token it was granted on."""
    kept = {k: claim_text(token_claims[k]) for k in RECORDED_CLAIMS if k in token_claims}
    return {"rule": rule.name, "claims": {k: v for k, v in kept.items() if v is not None}}
