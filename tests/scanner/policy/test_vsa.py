"""VSA statements: shape, signing with the existing DSSE signer, and what verify accepts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from gpuprov.cli import app
from scanner.model import AssetKind
from scanner.policy.facts import AssetFacts, ImageTrustFacts
from scanner.policy.vsa import VSA_PREDICATE, check_vsa, sign_vsa, vsa_statement
from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement
from tests.fixtures import keys

DIGEST = "sha256:" + "ab" * 32
FACTS = AssetFacts(
    kind=AssetKind.IMAGE,
    name="reg.example/ml/train:1",
    digest=DIGEST,
    scanned_at=None,
    files=(),
    image_trust=ImageTrustFacts("ci (x)", 3, "https://builder.example"),
)
WHEN = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def _statement(facts: AssetFacts = FACTS) -> dict[str, object]:
    return vsa_statement(
        facts, policy_uri="p.yaml", policy_sha256="0" * 64, policy_name="prod", time_verified=WHEN
    )


def test_statement_shape() -> None:
    doc = _statement()
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    assert doc["predicateType"] == VSA_PREDICATE
    assert doc["subject"] == [{"name": FACTS.name, "digest": {"sha256": "ab" * 32}}]
    predicate = doc["predicate"]
    assert isinstance(predicate, dict)
    assert predicate["verifiedLevels"] == ["SLSA_BUILD_LEVEL_3"]
    assert predicate["timeVerified"] == "2026-12-02T01:00:00Z"
    assert predicate["resourceUri"] == f"reg.example/ml/train:1@{DIGEST}"
    summary = check_vsa(Statement.from_bytes(json.dumps(doc).encode()))
    assert "VSA PASSED" in summary and "SLSA_BUILD_LEVEL_3" in summary


def test_no_vsa_without_a_sha256_subject() -> None:
    with pytest.raises(Rejected, match="by sha256 digest"):
        _statement(msgspec.structs.replace(FACTS, kind=AssetKind.HOST, digest="4c4c4544"))


def test_encrypted_or_bad_key_is_refused() -> None:
    with pytest.raises(Rejected, match="unencrypted PEM private key"):
        sign_vsa(_statement(), b"not a key")
    pem = keys.private_pem(keys.generate("ecdsa"), password=b"secret")
    with pytest.raises(Rejected, match="unencrypted PEM private key"):
        sign_vsa(_statement(), pem)


@pytest.mark.parametrize("kind", keys.KINDS)
def test_verify_accepts_passed_and_rejects_failed(kind: str, tmp_path: Path) -> None:
    key = keys.generate(kind)
    _, pub = keys.write_keypair(tmp_path, "gate", key)
    pem = keys.private_pem(key)
    good = tmp_path / "vsa.json"
    good.write_text(sign_vsa(_statement(), pem).to_json())
    runner = CliRunner()
    result = runner.invoke(app, ["verify", DIGEST, "--bundle", str(good), "--key", str(pub)])
    assert result.exit_code == 0, result.output
    assert "VSA PASSED by https://gpuprov.dev/gate" in result.stdout
    failed = _statement()
    predicate = failed["predicate"]
    assert isinstance(predicate, dict)
    predicate["verificationResult"] = "FAILED"
    bad = tmp_path / "failed.json"
    bad.write_text(sign_vsa(failed, pem).to_json())
    result = runner.invoke(app, ["verify", DIGEST, "--bundle", str(bad), "--key", str(pub)])
    assert result.exit_code == 1 and "not PASSED" in result.stderr
