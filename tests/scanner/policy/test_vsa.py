"""VSA statements: shape, signing with the existing DSSE signer, and what verify accepts."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from gpuprov.cli import app
from scanner.model import AssetKind
from scanner.policy.facts import AssetFacts, ImageTrustFacts
from scanner.policy.vsa import (
    CLOCK_SKEW,
    VSA_PREDICATE,
    VsaExpectations,
    check_vsa,
    parse_max_age,
    sign_vsa,
    vsa_statement,
)
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


@pytest.mark.parametrize(
    "digest",
    [
        "4c4c4544",
        None,
        "sha256:abcd",  # truncated: names no image
        DIGEST[:-1],
        DIGEST + "0",
        "sha256:" + "AB" * 32,  # the digest grammar is lower-case hex
        "sha256:" + "zz" * 32,
        "sha512:" + "ab" * 32,
        " " + DIGEST,
    ],
)
def test_no_vsa_without_a_sha256_subject(digest: str | None) -> None:
    with pytest.raises(Rejected, match="by sha256 digest"):
        _statement(msgspec.structs.replace(FACTS, kind=AssetKind.HOST, digest=digest))


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


# ---------------------------------------------------------------- what a relying party pins


def _predicate(**changes: object) -> Statement:
    doc = _statement()
    predicate = doc["predicate"]
    assert isinstance(predicate, dict)
    for key, value in changes.items():
        if value is None:
            predicate.pop(key, None)
        else:
            predicate[key] = value
    return Statement.from_bytes(json.dumps(doc).encode())


@pytest.mark.parametrize("result", [None, "passed", "FAILED", ""])
def test_a_result_other_than_passed_is_refused(result: str | None) -> None:
    with pytest.raises(Rejected, match="not PASSED"):
        check_vsa(_predicate(verificationResult=result))


@pytest.mark.parametrize(
    ("expect", "fragment"),
    [
        (VsaExpectations(policy_name="prod-eu"), "not the expected 'prod-eu'"),
        (VsaExpectations(policy_name="pro"), "not the expected 'pro'"),
        (VsaExpectations(policy_sha256="1" * 64), "policy digest"),
        (VsaExpectations(verifier_id="https://gpuprov.dev/gat"), "verifier.id"),
        (VsaExpectations(levels=("SLSA_BUILD_LEVEL_4",)), "SLSA_BUILD_LEVEL_4"),
        (VsaExpectations(levels=("SLSA_BUILD_LEVEL_3", "FIPS_140")), "FIPS_140"),
        (VsaExpectations(max_age=timedelta(minutes=59)), "older than the maximum age"),
    ],
)
def test_each_pin_refuses_what_differs(expect: VsaExpectations, fragment: str) -> None:
    now = WHEN + timedelta(hours=1)
    with pytest.raises(Rejected, match=re.escape(fragment)):
        check_vsa(_predicate(), expect, now=now)


def test_pins_that_hold_pass() -> None:
    expect = VsaExpectations(
        policy_name="prod",
        policy_sha256="0" * 64,
        verifier_id="https://gpuprov.dev/gate",
        max_age=timedelta(hours=1),
        # a level 3 VSA meets a level 1 or 3 requirement
        levels=("SLSA_BUILD_LEVEL_1", "SLSA_BUILD_LEVEL_3"),
    )
    assert "VSA PASSED" in check_vsa(_predicate(), expect, now=WHEN + timedelta(hours=1))
    # upper-case digests are the same digest
    same = VsaExpectations(policy_sha256="0" * 64)
    assert check_vsa(_predicate(policy={"uri": "x", "digest": {"sha256": "0" * 64}}), same)


def test_a_future_or_unreadable_time_is_refused() -> None:
    expect = VsaExpectations(max_age=timedelta(days=1))
    with pytest.raises(Rejected, match="in the future"):
        check_vsa(_predicate(), expect, now=WHEN - timedelta(minutes=6))
    assert check_vsa(_predicate(), expect, now=WHEN - timedelta(minutes=4))  # within skew
    for value in (None, "yesterday", "2026-12-02T01:00:00", 5):
        with pytest.raises(Rejected, match="timeVerified"):
            check_vsa(_predicate(timeVerified=value))


def test_no_vsa_for_a_digest_that_is_not_64_hex_digits() -> None:
    for bad in ("sha256:abcd", "sha256:" + "g" * 64, "sha256:" + "a" * 65, "sha512:" + "a" * 64):
        with pytest.raises(Rejected, match="by sha256 digest"):
            _statement(msgspec.structs.replace(FACTS, digest=bad))


def test_verify_command_pins_the_vsa(tmp_path: Path) -> None:
    key = keys.generate("ecdsa")
    _, pub = keys.write_keypair(tmp_path, "gate", key)
    statement = _statement()
    predicate = statement["predicate"]
    assert isinstance(predicate, dict)
    predicate["timeVerified"] = (datetime.now(UTC) - timedelta(hours=2)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    vsa = tmp_path / "vsa.json"
    vsa.write_text(sign_vsa(statement, keys.private_pem(key)).to_json())
    base = ["verify", DIGEST, "--bundle", str(vsa), "--key", str(pub)]
    runner = CliRunner()
    good = runner.invoke(
        app,
        [
            *base,
            "--policy-name",
            "prod",
            "--policy-digest",
            "sha256:" + "0" * 64,
            "--verifier-id",
            "https://gpuprov.dev/gate",
            "--max-age",
            "3h",
            "--verified-level",
            "SLSA_BUILD_LEVEL_2",
        ],
    )
    assert good.exit_code == 0, good.output
    for extra, fragment in (
        (["--policy-name", "lax"], "not the expected 'lax'"),
        (["--policy-digest", "1" * 64], "policy digest"),
        (["--verifier-id", "https://evil.example"], "verifier.id"),
        (["--max-age", "1h"], "older than the maximum age"),
        # repeatable: every level given is required
        (["--verified-level", "SLSA_BUILD_LEVEL_1", "--verified-level", "X"], "X"),
    ):
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code == 1 and fragment in result.stderr, (extra, result.output)
    for extra, fragment in (
        (["--policy-digest", "sha256:abcd"], "64 digits"),
        (["--max-age", "soon"], "--max-age"),
        (["--policy-name", ""], "--policy-name is empty"),
    ):
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code == 2 and fragment in result.stderr, (extra, result.output)


def test_verify_pins_refuse_an_attestation_that_is_not_a_vsa(tmp_path: Path) -> None:
    from scanner.verify.dsse import INTOTO_PAYLOAD_TYPE, sign_envelope

    key = keys.generate("ecdsa")
    _, pub = keys.write_keypair(tmp_path, "k", key)
    doc = {**_statement(), "predicateType": "https://slsa.dev/provenance/v1", "predicate": {}}
    envelope = sign_envelope(INTOTO_PAYLOAD_TYPE, json.dumps(doc).encode(), key)
    path = tmp_path / "att.json"
    path.write_text(envelope.to_json())
    base = ["verify", DIGEST, "--bundle", str(path), "--key", str(pub)]
    assert CliRunner().invoke(app, base).exit_code == 0
    pinned = CliRunner().invoke(app, [*base, "--policy-name", "prod"])
    assert pinned.exit_code == 1 and "not a VSA" in pinned.stderr


@pytest.mark.parametrize("outcome", [None, "passed", "PASSED ", "", True])
def test_verify_rejects_a_vsa_without_exactly_passed(outcome: object, tmp_path: Path) -> None:
    # through the command: a signed VSA whose result is missing or anything but the spec's
    # "PASSED" passes nothing
    key = keys.generate("ecdsa")
    _, pub = keys.write_keypair(tmp_path, "gate", key)
    statement = _statement()
    predicate = statement["predicate"]
    assert isinstance(predicate, dict)
    if outcome is None:
        del predicate["verificationResult"]
    else:
        predicate["verificationResult"] = outcome
    bundle = tmp_path / "vsa.json"
    bundle.write_text(sign_vsa(statement, keys.private_pem(key)).to_json())
    result = CliRunner().invoke(app, ["verify", DIGEST, "--bundle", str(bundle), "--key", str(pub)])
    assert result.exit_code == 1 and "not PASSED" in result.stderr
    assert "VSA PASSED" not in result.stdout


def test_the_subject_and_levels_of_a_vsa() -> None:
    # a name that carries its digest names the repository once; no provenance: level 0
    named = msgspec.structs.replace(FACTS, name=f"reg.example/ml/train@{DIGEST}", image_trust=None)
    predicate = _statement(named)["predicate"]
    assert isinstance(predicate, dict)
    assert predicate["resourceUri"] == f"reg.example/ml/train@{DIGEST}"
    assert predicate["verifiedLevels"] == ["SLSA_BUILD_LEVEL_0"]
    untrusted = msgspec.structs.replace(FACTS, image_trust=ImageTrustFacts("ci (x)", None))
    predicate = _statement(untrusted)["predicate"]
    assert isinstance(predicate, dict)
    assert predicate["verifiedLevels"] == ["SLSA_BUILD_LEVEL_0"]


@pytest.mark.parametrize(("digest", "said"), [(None, "has none"), ("4c4c", "has '4c4c'")])
def test_a_refusal_says_what_the_subject_has(digest: str | None, said: str) -> None:
    with pytest.raises(Rejected) as refused:
        _statement(msgspec.structs.replace(FACTS, digest=digest))
    assert str(refused.value) == f"a VSA names its subject by sha256 digest; {FACTS.name} {said}"


def test_the_signed_payload_is_canonical_json() -> None:
    # the same statement signs the same bytes whatever order its keys were built in
    statement = _statement()
    reordered = dict(reversed(list(statement.items())))
    pem = keys.private_pem(keys.generate("ed25519"))
    payloads = {sign_vsa(s, pem).payload for s in (statement, reordered)}
    assert payloads == {json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()}


@pytest.mark.parametrize(
    "predicate_type",
    [
        "https://slsa.dev/provenance/v1",  # sorts before the VSA's
        "https://slsa.dev/verification_summary/v2",  # and after it
        "https://slsa.dev/verification_summary/v1 ",
    ],
)
def test_only_a_vsa_predicate_is_a_vsa(predicate_type: str) -> None:
    doc = _statement()
    doc["predicateType"] = predicate_type
    with pytest.raises(Rejected, match="not a VSA: predicateType is"):
        check_vsa(Statement.from_bytes(json.dumps(doc).encode()))


def test_the_summary_names_the_policy_the_vsa_states() -> None:
    doc = _statement()
    summary = check_vsa(Statement.from_bytes(json.dumps(doc).encode()))
    assert summary == (
        "VSA PASSED by https://gpuprov.dev/gate at 2026-12-02T01:00:00Z, policy prod p.yaml "
        f"(sha256 {'0' * 64}), levels SLSA_BUILD_LEVEL_3"
    )
    # a policy that is no object is named as unknown, never read as one
    predicate = doc["predicate"]
    assert isinstance(predicate, dict)
    predicate["policy"] = "p.yaml"
    summary = check_vsa(Statement.from_bytes(json.dumps(doc).encode()))
    assert "policy prod None (sha256 None)" in summary


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("12h", 43_200), ("30d", 2_592_000), ("2w", 1_209_600)],
)
def test_an_age_in_each_unit(text: str, seconds: int) -> None:
    assert parse_max_age(text) == timedelta(seconds=seconds)
    assert parse_max_age(f" {text} ") == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "12", "h", "1y", "-1h", "1.5h", "1000000s", "1h30m"])
def test_what_is_no_age(text: str) -> None:
    with pytest.raises(ValueError, match="is not an age such as 90s"):
        parse_max_age(text)


def test_a_vsa_up_to_the_clock_skew_ahead_is_accepted() -> None:
    expect = VsaExpectations(max_age=timedelta(days=1))
    assert check_vsa(_predicate(), expect, now=WHEN - CLOCK_SKEW)  # exactly the skew ahead
    with pytest.raises(Rejected, match="in the future"):
        check_vsa(_predicate(), expect, now=WHEN - CLOCK_SKEW - timedelta(seconds=1))
    assert CLOCK_SKEW == timedelta(minutes=5)
    # exactly the maximum age is not older than it
    assert check_vsa(_predicate(), expect, now=WHEN + timedelta(days=1))
    with pytest.raises(Rejected, match="older than the maximum age"):
        check_vsa(_predicate(), expect, now=WHEN + timedelta(days=1, seconds=1))


def test_an_unreadable_time_is_quoted_cut_short() -> None:
    value = "2026-12-02T01:00:00Z" + "x" * 80
    with pytest.raises(Rejected) as refused:
        check_vsa(_predicate(timeVerified=value))
    assert str(refused.value) == f"VSA timeVerified {value[:64]!r} is not an RFC 3339 time"


def test_expectations_are_frozen() -> None:
    with pytest.raises(AttributeError):
        VsaExpectations().policy_name = "lax"  # type: ignore[misc]


def test_pins_are_equality_whichever_side_sorts_first() -> None:
    # a stated value sorting after the expected one, and before it
    for expect in (
        VsaExpectations(verifier_id="https://gpuprov.dev/gate2"),
        VsaExpectations(verifier_id="https://gpuprov.dev/gat"),
        VsaExpectations(policy_name="prod2"),
        VsaExpectations(policy_name="pro"),
    ):
        with pytest.raises(Rejected, match="not the expected"):
            check_vsa(_predicate(), expect)
    stated = _predicate(policy={"uri": "x", "digest": {"sha256": "f" * 64}})
    for pinned in ("0" * 64, "f" * 63 + "e"):
        with pytest.raises(Rejected, match="policy digest"):
            check_vsa(stated, VsaExpectations(policy_sha256=pinned))
    assert check_vsa(stated, VsaExpectations(policy_sha256="F" * 64))
