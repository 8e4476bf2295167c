"""Shared fixtures of the verify tests: a private Sigstore instance and policies over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanner.verify.keys import TrustedKey
from scanner.verify.trust import Scope, Signer, TrustPolicy
from scanner.verify.trusted_roots import SigstoreRoot
from tests.fixtures import keys
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore

#: ../shared/fixtures relative to the repository root (CI has it; a fresh clone does not).
SHARED_FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def instance() -> PrivateSigstore:
    return PrivateSigstore()


@pytest.fixture(scope="session")
def other_instance() -> PrivateSigstore:
    return PrivateSigstore(name="other-test")


@pytest.fixture(scope="session")
def root(instance: PrivateSigstore) -> SigstoreRoot:
    return SigstoreRoot.from_bytes(instance.trusted_root_json(), "private")


def keyless_policy(root: SigstoreRoot, subject: str = SUBJECT, issuer: str = ISSUER) -> TrustPolicy:
    return TrustPolicy.for_identity(issuer, [root], subject=subject)


def key_policy(root: SigstoreRoot | None, *private_keys: object, images: str = "*") -> TrustPolicy:
    signers = tuple(
        Signer(
            f"key{i}",
            Scope(("*",), (images,)),
            key=TrustedKey.from_pem(keys.public_pem(k)),
        )
        for i, k in enumerate(private_keys)
    )
    return TrustPolicy(signers, (root,) if root is not None else ())


@pytest.fixture(scope="session")
def policy(root: SigstoreRoot) -> TrustPolicy:
    return keyless_policy(root)


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never read or write the user's cache (a refreshed public-good root lives there)."""
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path_factory.mktemp("gpuprov-cache")))
