"""Real public data: Sigstore conformance `bundle-verify` cases and a real release-wheel bundle.

Runs when ../shared/fixtures is present (CI has it) and skips cleanly otherwise. Every case,
certificate-based and managed-key alike, must get the verdict its name promises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.errors import VerifyError
from scanner.verify.keys import TrustedKey
from scanner.verify.sigstore_bundles import ArtifactDigest, verify_bundle
from scanner.verify.trust import Scope, Signer, TrustPolicy
from scanner.verify.trusted_roots import SigstoreRoot
from tests.scanner.verify.conftest import SHARED_FIXTURES

CASES = SHARED_FIXTURES / "sigstore-conformance" / "bundle-verify"
REAL = SHARED_FIXTURES / "sigstore-real"
DEFAULT_IDENTITY = (
    "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/"
    ".github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main"
)
DEFAULT_ISSUER = "https://token.actions.githubusercontent.com"
WHEEL_IDENTITY = (
    "https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2"
)


def _cases() -> list[Path]:
    if not CASES.is_dir():
        return []
    return sorted(p for p in CASES.iterdir() if p.is_dir())


def _text(path: Path, default: str) -> str:
    return path.read_text().strip() if path.exists() else default


def _verify_case(case: Path) -> str:
    artifact = case / "artifact" if (case / "artifact").exists() else CASES / "a.txt"
    if (case / "trusted_root.json").exists():
        roots = [SigstoreRoot.from_file(case / "trusted_root.json")]
    else:
        roots = [SigstoreRoot.public_good()]
    if (case / "key.pub").exists():
        key = TrustedKey.from_pem((case / "key.pub").read_bytes())
        policy = TrustPolicy((Signer("key.pub", Scope(("*",)), key=key),), tuple(roots))
    else:
        policy = TrustPolicy.for_identity(
            _text(case / "issuer", DEFAULT_ISSUER),
            roots,
            subject=_text(case / "identity", DEFAULT_IDENTITY),
        )
    result = verify_bundle(
        (case / "bundle.sigstore.json").read_bytes(), policy, artifact=artifact.read_bytes()
    )
    return result.identity


def test_the_conformance_fixtures_are_present() -> None:
    """The cases below come from ../shared/fixtures: without it they would not run at all."""
    assert CASES.is_dir() and _cases(), f"{CASES} is absent or empty"
    assert REAL.is_dir(), f"{REAL} is absent"


@pytest.mark.parametrize("case", _cases(), ids=lambda p: p.name)
def test_conformance_case(case: Path) -> None:
    if case.name.endswith("_fail"):
        # A malformed key or root is refused when loaded; either way nothing verifies.
        with pytest.raises(VerifyError):
            _verify_case(case)
    else:
        assert _verify_case(case)


def test_real_release_wheel_bundle() -> None:
    wheel = (REAL / "bundle_v3_github.whl").read_bytes()
    bundle = (REAL / "bundle_v3_github.whl.sigstore").read_bytes()
    root = SigstoreRoot.public_good()
    good = TrustPolicy.for_identity(DEFAULT_ISSUER, [root], subject=WHEEL_IDENTITY)
    assert WHEEL_IDENTITY in verify_bundle(bundle, good, artifact=wheel).identity
    digest = ArtifactDigest.of_file(REAL / "bundle_v3_github.whl")
    assert verify_bundle(bundle, good, artifact=digest).root == "public-good"
    other = TrustPolicy.for_identity(DEFAULT_ISSUER, [root], subject=WHEEL_IDENTITY + "x")
    with pytest.raises(VerifyError, match="not trusted"):
        verify_bundle(bundle, other, artifact=wheel)
    flipped = bytearray(wheel)
    flipped[len(flipped) // 2] ^= 0x01
    with pytest.raises(VerifyError, match="artifact differs"):
        verify_bundle(bundle, good, artifact=bytes(flipped))
