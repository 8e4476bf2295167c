"""SLSA provenance v1 checks for an image, as SLSA's "Verifying artifacts" describes.

Input is an in-toto statement whose envelope signature and signer were already verified (by
`cosign` or `sigstore_bundles`); this module checks the rest: predicate type, subject digest,
builder.id against the policy's allowed builders (which caps the Build level), and the expected
source repository and build type where the policy states them.
"""

from __future__ import annotations

import re
from typing import Any

from msgspec import Struct

from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement
from scanner.verify.trust import Signer, TrustPolicy

SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"


class SlsaResult(Struct, frozen=True):
    """The verified claim: Build level, builder and signer."""

    level: int
    builder_id: str
    signer: str
    build_type: str
    source_repo: str | None


def normalize_repo(uri: str) -> str:
    """`git+https://github.com/o/r@refs/tags/v1` and `https://github.com/o/r.git` -> same key."""
    value = uri.strip().removeprefix("git+")
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "", value
    host, _, path = rest.partition("/")
    path = path.split("@", 1)[0].removesuffix("/").removesuffix(".git")
    return f"{scheme}://{host.lower()}/{path}".lower() if scheme else f"{host}/{path}".lower()


def source_repos(predicate: dict[str, Any]) -> list[str]:
    """Source repositories a provenance v1 predicate names (build-type conventions vary)."""
    found: list[str] = []
    definition = predicate.get("buildDefinition") or {}
    external = definition.get("externalParameters") or {}
    if isinstance(external, dict):
        workflow = external.get("workflow")
        if isinstance(workflow, dict) and isinstance(workflow.get("repository"), str):
            found.append(workflow["repository"])
        for key in ("source", "repository", "sourceRepository"):
            value = external.get(key)
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, dict) and isinstance(value.get("uri"), str):
                found.append(value["uri"])
    for dep in definition.get("resolvedDependencies") or []:
        if isinstance(dep, dict) and isinstance(dep.get("uri"), str):
            if dep["uri"].startswith("git+"):
                found.append(dep["uri"])
    return found


def verify_provenance(
    statement: Statement,
    *,
    subject_sha256: str,
    signer: Signer,
    policy: TrustPolicy,
    repository: str,
) -> SlsaResult:
    """Check a verified statement as SLSA provenance for the artifact; `Rejected` says why."""
    # (1) The envelope's signature and signer are the caller's precondition.
    # (2) predicateType must be SLSA provenance v1.
    if statement.predicate_type != SLSA_PROVENANCE_V1:
        raise Rejected(f"predicate type {statement.predicate_type} is not {SLSA_PROVENANCE_V1}")
    # (3) The subject must be this artifact.
    statement.require_subject(subject_sha256)
    predicate = statement.predicate
    try:
        builder_id = predicate["runDetails"]["builder"]["id"]
        build_type = predicate["buildDefinition"]["buildType"]
    except (KeyError, TypeError) as e:
        raise Rejected(f"provenance lacks {e}: not a SLSA provenance v1 predicate") from e
    if not isinstance(builder_id, str) or not isinstance(build_type, str):
        raise Rejected("provenance builder.id and buildType must be strings")
    # (4) builder.id must be allowed; the rule's level is the most this builder may claim.
    rules = [r for r in policy.builders if r.matches(builder_id)]
    if not rules:
        raise Rejected(f"builder {builder_id} is not an allowed builder of the trust policy")
    allowed = [r for r in rules if not r.signers or signer.name in r.signers]
    if not allowed:
        raise Rejected(f"signer {signer.name} may not attest for builder {builder_id}")
    level = max(r.level for r in allowed)
    # (5) Expectations the policy states for this image: build type, source, minimum level.
    sources = source_repos(predicate)
    normalized = {normalize_repo(s) for s in sources}
    for expectation in policy.expectations:
        if not expectation.applies_to(repository):
            continue
        if expectation.build_type and build_type != expectation.build_type:
            raise Rejected(f"build type {build_type} is not the expected {expectation.build_type}")
        if expectation.source_repo and normalize_repo(expectation.source_repo) not in normalized:
            raise Rejected(
                f"provenance source {', '.join(sources) or '(none)'} is not the expected "
                f"{expectation.source_repo}"
            )
        if level < expectation.min_level:
            raise Rejected(
                f"builder {builder_id} reaches Build L{level}, "
                f"policy needs L{expectation.min_level}"
            )
    source = sources[0] if sources else None
    if source is not None and re.match(r"^git\+", source):
        source = source.removeprefix("git+")
    return SlsaResult(level, builder_id, signer.describe(), build_type, source)
