"""The trust policy model: which keys and keyless identities gpuprov trusts, for what (scope,
SLSA builders and expectations), under which pinned Sigstore roots.

Used by every signature check in the verify stage and by the service; loaded from YAML by
`scanner.verify.trust_file`. Invariants are checked at construction and fail closed: a policy
that trusts no signer is an error, and anything that weakens verification is an explicit,
logged `UnsafeOption`.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Iterable, Sequence
from enum import StrEnum
from pathlib import Path

from msgspec import Struct
from msgspec.structs import replace

from scanner.errors import VerifyError
from scanner.verify.keys import TrustedKey
from scanner.verify.trusted_roots import SigstoreRoot

_log = logging.getLogger("gpuprov.trust")


class UnsafeOption(StrEnum):
    """A named weakening of verification that a policy must ask for explicitly."""

    #: Accept key signatures that carry no transparency-log proof (NGC-style cosign keys).
    IGNORE_TLOG = "ignore-tlog"


class IdentityRule(Struct, frozen=True):
    """A keyless identity: the OIDC issuer exactly, the subject exactly or by full-match regex."""

    issuer: str
    subject: str | None = None
    subject_regex: str | None = None

    def __post_init__(self) -> None:
        if (self.subject is None) == (self.subject_regex is None):
            raise VerifyError("a keyless identity needs exactly one of subject, subject_regex")
        if not self.issuer:
            raise VerifyError("a keyless identity needs an OIDC issuer")
        if self.subject_regex is not None:
            try:
                re.compile(self.subject_regex)
            except re.error as e:
                raise VerifyError(f"bad subject_regex {self.subject_regex!r}: {e}") from e

    def matches(self, issuer: str | None, subjects: Iterable[str]) -> bool:
        """Issuer must be equal; one subject must be equal or fully match the regex."""
        if issuer != self.issuer:
            return False
        if self.subject is not None:
            return self.subject in subjects
        assert self.subject_regex is not None
        # fullmatch: the regex is anchored at both ends whatever the author wrote.
        return any(re.fullmatch(self.subject_regex, s) for s in subjects)

    def describe(self) -> str:
        subject = self.subject if self.subject is not None else f"/{self.subject_regex}/"
        return f"{subject} (issuer {self.issuer})"


class Scope(Struct, frozen=True):
    """What a signer may vouch for: library families and image repositories ("*" = any)."""

    families: tuple[str, ...] = ()
    images: tuple[str, ...] = ()

    def allows_family(self, family: str | None) -> bool:
        if "*" in self.families:
            return True
        return family is not None and family.lower() in {f.lower() for f in self.families}

    def allows_image(self, repository: str) -> bool:
        return any(fnmatch.fnmatchcase(repository, pattern) for pattern in self.images)


class Signer(Struct, frozen=True):
    """One trusted signer: a key or a keyless identity, with its scope and unsafe options."""

    name: str
    scope: Scope
    key: TrustedKey | None = None
    identity: IdentityRule | None = None
    unsafe: frozenset[UnsafeOption] = frozenset()

    def __post_init__(self) -> None:
        if not self.scope.families and not self.scope.images:
            raise VerifyError(
                f"signer {self.name!r} may vouch for nothing: give families and/or images"
            )
        if (self.key is None) == (self.identity is None):
            raise VerifyError(f"signer {self.name!r} needs exactly one of a key or an identity")

    def describe(self) -> str:
        """The identity shown to users and recorded in BOMs."""
        if self.key is not None:
            return f"{self.name} ({self.key.describe()})"
        assert self.identity is not None
        return f"{self.name} ({self.identity.describe()})"

    def allows_unsafe(self, option: UnsafeOption, context: str) -> bool:
        """Whether the policy opted into `option` for this signer; every use is logged."""
        if option in self.unsafe:
            _log.warning("UNSAFE %s used for signer %s: %s", option.value, self.name, context)
            return True
        return False


class BuilderRule(Struct, frozen=True):
    """An allowed SLSA builder and the highest Build level its provenance may claim."""

    level: int
    id: str | None = None
    id_regex: str | None = None
    signers: tuple[str, ...] = ()  # only these signers may attest for this builder

    def __post_init__(self) -> None:
        if (self.id is None) == (self.id_regex is None):
            raise VerifyError("a builder needs exactly one of id, id_regex")
        if self.id_regex is not None:
            try:
                re.compile(self.id_regex)
            except re.error as e:
                raise VerifyError(f"bad builder id_regex: {e}") from e
        # SLSA Build L2+ means the build platform itself signs the provenance: a rule that lets
        # any trusted signer claim such a builder would let a project key forge its level.
        if self.level >= 2 and not self.signers:
            raise VerifyError(
                f"builder {self.id or self.id_regex} claims Build L{self.level}: name the "
                "signers (the build platform's identity) that may attest for it"
            )

    def matches(self, builder_id: str) -> bool:
        if self.id is not None:
            return builder_id == self.id
        return self.id_regex is not None and re.fullmatch(self.id_regex, builder_id) is not None


class SlsaExpectation(Struct, frozen=True):
    """What an image's provenance must state, when the policy states it."""

    images: tuple[str, ...]
    source_repo: str | None = None
    build_type: str | None = None
    min_level: int = 0

    def __post_init__(self) -> None:
        if not self.images:
            raise VerifyError("an SLSA expectation needs images")

    def applies_to(self, repository: str) -> bool:
        return any(fnmatch.fnmatchcase(repository, p) for p in self.images)


class TrustPolicy(Struct, frozen=True):
    """The whole trust policy: signers, pinned Sigstore roots and SLSA rules."""

    signers: tuple[Signer, ...]
    roots: tuple[SigstoreRoot, ...]
    builders: tuple[BuilderRule, ...] = ()
    expectations: tuple[SlsaExpectation, ...] = ()
    source: str = "<policy>"

    def __post_init__(self) -> None:
        if not self.signers:
            raise VerifyError(f"trust policy {self.source} trusts no signer (fail closed)")
        names = [s.name for s in self.signers]
        if len(set(names)) != len(names):
            raise VerifyError(f"trust policy {self.source} repeats a signer name")

    def key_signers(self) -> tuple[Signer, ...]:
        return tuple(s for s in self.signers if s.key is not None)

    def keyless_signers(self) -> tuple[Signer, ...]:
        return tuple(s for s in self.signers if s.identity is not None)

    def for_image(self, repository: str) -> tuple[Signer, ...]:
        """Signers allowed to vouch for images of `repository`."""
        return tuple(s for s in self.signers if s.scope.allows_image(repository))

    def signer(self, name: str) -> Signer:
        for s in self.signers:
            if s.name == name:
                return s
        raise KeyError(name)

    @classmethod
    def for_key(cls, pem_path: Path) -> TrustPolicy:
        """The one-key policy of `--trust-key PUB.pem`: that key, for every family and image."""
        key = TrustedKey.from_pem_file(pem_path)
        signer = Signer(pem_path.name, Scope(("*",), ("*",)), key=key)
        return cls((signer,), (), source=f"--trust-key {pem_path}")

    @classmethod
    def for_identity(
        cls,
        issuer: str,
        roots: Sequence[SigstoreRoot],
        *,
        subject: str | None = None,
        subject_regex: str | None = None,
    ) -> TrustPolicy:
        """The one-identity policy of `gpuprov verify --certificate-identity ...`."""
        rule = IdentityRule(issuer, subject, subject_regex)
        signer = Signer(rule.describe(), Scope(("*",), ("*",)), identity=rule)
        return cls((signer,), tuple(roots), source="command line")


def with_roots(policy: TrustPolicy, roots: Sequence[SigstoreRoot]) -> TrustPolicy:
    """A copy of `policy` whose pinned roots are replaced by `roots`."""
    return replace(policy, roots=tuple(roots))
