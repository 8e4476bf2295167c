"""SLSA Verification Summary Attestations (VSA) of gate decisions.

On allow, the gate can state what it verified as an in-toto Statement with predicate
``https://slsa.dev/verification_summary/v1`` (SLSA v1.2 verification_summary), signed in a DSSE
envelope by the existing signer (scanner/verify/dsse.py). `gpuprov verify` checks it.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from msgspec import Struct

from scanner import __version__
from scanner.policy.facts import AssetFacts
from scanner.verify.dsse import INTOTO_PAYLOAD_TYPE, Envelope, sign_envelope
from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement

VSA_PREDICATE = "https://slsa.dev/verification_summary/v1"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
VERIFIER_ID = "https://gpuprov.dev/gate"
_SUBJECT_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def vsa_statement(
    facts: AssetFacts,
    *,
    policy_uri: str,
    policy_sha256: str,
    policy_name: str,
    time_verified: datetime,
    verifier_id: str = VERIFIER_ID,
) -> dict[str, Any]:
    """The VSA statement for an allowed asset; refuses one without a sha256 digest."""
    digest = facts.digest or ""
    if not _SUBJECT_DIGEST.fullmatch(digest):
        raise Rejected(
            f"a VSA names its subject by sha256 digest; {facts.name} has "
            + (f"{digest!r}" if digest else "none")
        )
    level = facts.image_trust.slsa_level if facts.image_trust else None
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": facts.name, "digest": {"sha256": digest.removeprefix("sha256:")}}],
        "predicateType": VSA_PREDICATE,
        "predicate": {
            "verifier": {"id": verifier_id, "version": {"gpuprov": __version__}},
            "timeVerified": time_verified.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "resourceUri": f"{facts.name.split('@')[0]}@{digest}",
            "policy": {"uri": policy_uri, "digest": {"sha256": policy_sha256}},
            "verificationResult": "PASSED",
            "verifiedLevels": [f"SLSA_BUILD_LEVEL_{level or 0}"],
            "slsaVersion": "1.2",
            "gpuprov": {"policyName": policy_name, "producer": facts.producer},
        },
    }


def sign_vsa(statement: dict[str, Any], private_key_pem: bytes) -> Envelope:
    """Sign a VSA statement with a PEM private key (unencrypted; ECDSA, Ed25519, RSA)."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as e:
        raise Rejected(f"not an unencrypted PEM private key: {e}") from None
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    return sign_envelope(INTOTO_PAYLOAD_TYPE, payload, key)


class VsaExpectations(Struct, frozen=True):
    """What a relying party pins in a VSA beyond its signature and subject, as an admission
    controller would (slsa-verifier's ``--expected-*`` checks): each set field must hold."""

    policy_name: str | None = None
    #: the policy document's SHA-256 (hex)
    policy_sha256: str | None = None
    verifier_id: str | None = None
    #: the oldest ``timeVerified`` accepted, as an age from now
    max_age: timedelta | None = None
    #: levels the VSA must state; ``SLSA_BUILD_LEVEL_n`` is met by level n or higher
    levels: tuple[str, ...] = ()


#: how far ahead of this clock a VSA's timeVerified may be (the signer's clock may run ahead)
CLOCK_SKEW = timedelta(minutes=5)
_BUILD_LEVEL = re.compile(r"^SLSA_BUILD_LEVEL_([0-9])$")


_AGE = re.compile(r"([0-9]{1,6})([smhdw])")
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_max_age(text: str) -> timedelta:
    """``90s``, ``15m``, ``12h``, ``30d`` or ``2w`` (ValueError otherwise)."""
    match = _AGE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an age such as 90s, 15m, 12h, 30d or 2w")
    return timedelta(seconds=int(match[1]) * _AGE_UNITS[match[2]])


def _time_verified(value: object) -> datetime:
    if not isinstance(value, str):
        raise Rejected(f"VSA timeVerified is {value!r}, not an RFC 3339 time")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Rejected(f"VSA timeVerified {value[:64]!r} is not an RFC 3339 time") from None
    if when.tzinfo is None:
        raise Rejected(f"VSA timeVerified {value[:64]!r} has no time zone")
    return when.astimezone(UTC)


def _level_met(required: str, stated: list[str]) -> bool:
    want = _BUILD_LEVEL.match(required)
    if want is None:
        return required in stated
    return any(
        (m := _BUILD_LEVEL.match(level)) is not None and int(m[1]) >= int(want[1])
        for level in stated
    )


def check_vsa(
    statement: Statement, expect: VsaExpectations | None = None, now: datetime | None = None
) -> str:
    """Check a signature-verified statement is a passing VSA that meets ``expect``; a one-line
    summary of it. Raises `Rejected` naming the first expectation that fails."""
    if statement.predicate_type != VSA_PREDICATE:
        raise Rejected(f"not a VSA: predicateType is {statement.predicate_type!r}")
    p = statement.predicate
    if p.get("verificationResult") != "PASSED":
        raise Rejected(f"VSA verificationResult is {p.get('verificationResult')!r}, not PASSED")
    policy = p.get("policy") if isinstance(p.get("policy"), dict) else {}
    assert isinstance(policy, dict)
    digest = policy.get("digest") if isinstance(policy.get("digest"), dict) else {}
    assert isinstance(digest, dict)
    verifier = p.get("verifier") if isinstance(p.get("verifier"), dict) else {}
    assert isinstance(verifier, dict)
    extra = p.get("gpuprov") if isinstance(p.get("gpuprov"), dict) else {}
    assert isinstance(extra, dict)
    raw_levels = p.get("verifiedLevels")
    levels = [str(v) for v in raw_levels] if isinstance(raw_levels, list) else []
    when = _time_verified(p.get("timeVerified"))
    expect = expect or VsaExpectations()
    if expect.verifier_id is not None and verifier.get("id") != expect.verifier_id:
        raise Rejected(
            f"VSA verifier.id is {verifier.get('id')!r}, not the expected {expect.verifier_id!r}"
        )
    if expect.policy_name is not None and extra.get("policyName") != expect.policy_name:
        raise Rejected(
            f"VSA policy is {extra.get('policyName')!r}, not the expected {expect.policy_name!r}"
        )
    if expect.policy_sha256 is not None and str(digest.get("sha256", "")).lower() != (
        expect.policy_sha256.lower()
    ):
        raise Rejected(
            f"VSA policy digest is sha256 {digest.get('sha256')!r}, not the expected "
            f"{expect.policy_sha256.lower()}"
        )
    for level in expect.levels:
        if not _level_met(level, levels):
            raise Rejected(f"VSA verifiedLevels {levels} do not meet the required {level}")
    if expect.max_age is not None:
        now = (now or datetime.now(UTC)).astimezone(UTC)
        if when > now + CLOCK_SKEW:
            raise Rejected(f"VSA timeVerified {when:%Y-%m-%dT%H:%M:%SZ} is in the future")
        if now - when > expect.max_age:
            raise Rejected(
                f"VSA timeVerified {when:%Y-%m-%dT%H:%M:%SZ} is older than the maximum age "
                f"{expect.max_age}"
            )
    return (
        f"VSA PASSED by {verifier.get('id')} at {p.get('timeVerified')}, policy "
        f"{extra.get('policyName')} {policy.get('uri')} (sha256 {digest.get('sha256')}), levels "
        + ", ".join(levels)
    )
