"""Integrity verdicts from digests and owner records."""

from __future__ import annotations

from scanner.model import Digests, Integrity, OwnedFile, Package, Sha256
from scanner.verify.integrity import integrity_verdict

PKG = Package(manager="dpkg", name="libcudnn9-cuda-12", version="9.7.0.66-1", purl="pkg:deb/x/y@1")
D = Digests(size=1, sha256=Sha256("ab" * 32), md5="cd" * 16)


def test_unowned() -> None:
    assert integrity_verdict(D, None, None)[0] is Integrity.UNOWNED


def test_verified_and_modified_md5() -> None:
    ok = OwnedFile("/x", "md5", "CD" * 16)
    assert integrity_verdict(D, PKG, ok)[0] is Integrity.VERIFIED
    bad = OwnedFile("/x", "md5", "ee" * 16)
    verdict, reason = integrity_verdict(D, PKG, bad)
    assert verdict is Integrity.MODIFIED
    assert "libcudnn9-cuda-12" in reason and "ee" * 16 in reason


def test_verified_sha256() -> None:
    assert integrity_verdict(D, PKG, OwnedFile("/x", "sha256", "ab" * 32))[0] is Integrity.VERIFIED


def test_no_record_cases() -> None:
    assert integrity_verdict(D, PKG, OwnedFile("/x", None, None))[0] is Integrity.NO_RECORD
    verdict, reason = integrity_verdict(D, PKG, OwnedFile("/x", "sha512", "00"))
    assert verdict is Integrity.NO_RECORD and "sha512" in reason
    no_md5 = Digests(size=1, sha256=Sha256("ab" * 32))
    assert (
        integrity_verdict(no_md5, PKG, OwnedFile("/x", "md5", "cd" * 16))[0] is Integrity.NO_RECORD
    )


def test_a_digest_is_compared_in_full() -> None:
    """Equal on the first 16 hex characters (or all but the last) is still another file."""
    for recorded in ("ab" * 8 + "00" * 24, "ab" * 31 + "ac"):
        verdict, _ = integrity_verdict(D, PKG, OwnedFile("/x", "sha256", recorded))
        assert verdict is Integrity.MODIFIED
    verdict, _ = integrity_verdict(D, PKG, OwnedFile("/x", "md5", "cd" * 15 + "ce"))
    assert verdict is Integrity.MODIFIED
    # A record that is only a prefix of the digest proves nothing either.
    verdict, _ = integrity_verdict(D, PKG, OwnedFile("/x", "sha256", "ab" * 8))
    assert verdict is Integrity.MODIFIED


def test_a_record_or_an_owner_alone_is_unowned() -> None:
    assert integrity_verdict(D, PKG, None)[0] is Integrity.UNOWNED
    assert integrity_verdict(D, None, OwnedFile("/x", "sha256", "ab" * 32))[0] is Integrity.UNOWNED


def test_a_record_needs_both_algorithm_and_digest() -> None:
    for record in (
        OwnedFile("/x", None, "ab" * 32),
        OwnedFile("/x", "md5", ""),
        OwnedFile("/x", "md5", None),
    ):
        verdict, reason = integrity_verdict(D, PKG, record)
        assert verdict is Integrity.NO_RECORD and "recorded no digest" in reason
