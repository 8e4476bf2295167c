"""SLSA Verification Summary Attestations (VSA) of gate decisions.

On allow, the gate can state what it verified as an in-toto Statement with predicate
``https://slsa.dev/verification_summary/v1`` (SLSA v1.2 verification_summary), signed in a DSSE
envelope by the existing signer (scanner/verify/dsse.py). `gpuprov verify` checks it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from scanner import __version__
from scanner.policy.facts import AssetFacts
from scanner.verify.dsse import INTOTO_PAYLOAD_TYPE, Envelope, sign_envelope
from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement

VSA_PREDICATE = "https://slsa.dev/verification_summary/v1"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
VERIFIER_ID = "https://gpuprov.dev/gate"


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
    if not digest.startswith("sha256:") or len(digest) != 71:
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


def check_vsa(statement: Statement) -> str:
    """Check a signature-verified statement is a passing VSA; a one-line summary of it."""
    if statement.predicate_type != VSA_PREDICATE:
        raise Rejected(f"not a VSA: predicateType is {statement.predicate_type!r}")
    p = statement.predicate
    if p.get("verificationResult") != "PASSED":
        raise Rejected(f"VSA verificationResult is {p.get('verificationResult')!r}, not PASSED")
    policy = p.get("policy") if isinstance(p.get("policy"), dict) else {}
    assert isinstance(policy, dict)
    levels = p.get("verifiedLevels") or []
    return (
        f"VSA PASSED by {(p.get('verifier') or {}).get('id')} at {p.get('timeVerified')}, policy "
        f"{policy.get('uri')} (sha256 {(policy.get('digest') or {}).get('sha256')}), levels "
        + ", ".join(map(str, levels))
    )
