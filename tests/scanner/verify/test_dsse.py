"""DSSE: PAE per spec, both base64 alphabets, key signatures of every accepted type."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from scanner.verify.dsse import (
    INTOTO_PAYLOAD_TYPE,
    Envelope,
    Signature,
    b64decode,
    pae,
    sign_envelope,
    verify_envelope,
)
from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement
from scanner.verify.keys import TrustedKey
from tests.fixtures import keys
from tests.fixtures.sigstore_private import _key_sign, statement


def test_pae_matches_the_spec_example() -> None:
    # DSSE protocol.md test vector.
    got = pae("http://example.com/HelloWorld", b"hello world")
    assert got == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert pae("", b"") == b"DSSEv1 0  0 "
    # Lengths are in bytes, not characters.
    assert pae("t\u00e9", "\u00e9".encode()) == b"DSSEv1 3 t\xc3\xa9 2 \xc3\xa9"


@pytest.mark.parametrize(
    "text",
    ["+/+/", "-_-_", "-_-_" + "", "+/8", "-_8"],
)
def test_base64_both_alphabets_padding_optional(text: str) -> None:
    expected = base64.b64decode("+/+/") if len(text) == 4 else base64.b64decode("+/8=")
    assert b64decode(text) == expected


@pytest.mark.parametrize("text", ["not base64!", "ab$d", "a", "ab$cd", "YW Jj", "YWJj\n", "YW=Jj"])
def test_base64_garbage_rejected(text: str) -> None:
    with pytest.raises(Rejected):
        b64decode(text)


@pytest.mark.parametrize("kind", keys.KINDS)
def test_sign_verify_each_key_type(kind: str) -> None:
    key = keys.shared(kind)
    trusted = TrustedKey.from_pem(keys.public_pem(key))
    env = sign_envelope("application/vnd.in-toto+json", b'{"a": 1}', key)
    parsed = Envelope.from_json(env.to_json())
    assert verify_envelope(parsed, [trusted]) == trusted


def test_a_field_given_twice_is_refused_whichever_copy_is_signed() -> None:
    """Readers disagree on which of two equal keys counts (the last here, the first in many
    others): an envelope or statement with one may verify here and mean another thing there."""
    key = keys.shared("ecdsa")
    signed = statement([("lib.so", "a" * 64)], "https://example.test/p", {})
    env = sign_envelope(INTOTO_PAYLOAD_TYPE, signed, key)
    doc = env.to_json().strip()
    forged = '"payload": "' + base64.b64encode(b'{"_type": "x"}').decode() + '", '
    for twice in (doc.replace('"payload": ', forged + '"payload": ', 1), doc[:-1] + ", " + doc[1:]):
        with pytest.raises(Rejected, match="duplicate key"):
            Envelope.from_json(twice)
    payload = env.payload.decode()
    doubled = payload[:-1] + ', "predicateType": "https://example.test/other"}'
    with pytest.raises(Rejected, match="duplicate key 'predicateType'"):
        Statement.from_bytes(doubled.encode())


def test_url_safe_unpadded_envelope_verifies() -> None:
    key = keys.shared("ecdsa")
    env = sign_envelope("text/plain", b"\xfb\xff payload with url-unsafe bytes \xfe", key)
    doc = env.to_dict()
    doc["payload"] = base64.urlsafe_b64encode(env.payload).decode().rstrip("=")
    doc["signatures"][0]["sig"] = (
        base64.urlsafe_b64encode(env.signatures[0].sig).decode().rstrip("=")
    )
    parsed = Envelope.from_dict(doc)
    assert parsed.payload == env.payload
    verify_envelope(parsed, [TrustedKey.from_pem(keys.public_pem(key))])


def test_rsa_pkcs1v15_signature_from_other_tools_verifies() -> None:
    key = keys.shared("rsa")
    sig = key.sign(pae("x/y", b"data"), padding.PKCS1v15(), hashes.SHA256())
    env = Envelope.from_dict(
        {
            "payloadType": "x/y",
            "payload": base64.b64encode(b"data").decode(),
            "signatures": [{"sig": base64.b64encode(sig).decode()}],
        }
    )
    verify_envelope(env, [TrustedKey.from_pem(keys.public_pem(key))])


def test_tampering_and_wrong_keys_are_rejected() -> None:
    key = keys.shared("ecdsa")
    trusted = TrustedKey.from_pem(keys.public_pem(key))
    env = sign_envelope("application/vnd.in-toto+json", b"original", key)
    tampered = Envelope(env.payload_type, b"changed", env.signatures)
    with pytest.raises(Rejected, match="no DSSE signature verifies"):
        verify_envelope(tampered, [trusted])
    retyped = Envelope("text/plain", env.payload, env.signatures)
    with pytest.raises(Rejected):
        verify_envelope(retyped, [trusted])
    other = TrustedKey.from_pem(keys.public_pem(keys.generate("ecdsa")))
    with pytest.raises(Rejected, match="tried"):
        verify_envelope(env, [other])
    with pytest.raises(Rejected, match="no trusted key"):
        verify_envelope(env, [])


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"payload": "", "signatures": [{"sig": "AA=="}]},
        {"payloadType": "t", "signatures": [{"sig": "AA=="}]},
        {"payloadType": "t", "payload": "", "signatures": []},
        {"payloadType": "t", "payload": "", "signatures": [{"keyid": "x"}]},
    ],
)
def test_malformed_envelopes_rejected(doc: object) -> None:
    with pytest.raises(Rejected):
        Envelope.from_dict(doc)
    with pytest.raises(Rejected):
        Envelope.from_json(b"{not json")


def test_statement_subject_matching() -> None:
    stmt = Statement.from_bytes(statement([("a", "ab" * 32), ("b", "cd" * 32)], "p", {}))
    assert stmt.require_subject("sha256:" + "CD" * 32).name == "b"
    with pytest.raises(Rejected, match="in-toto subject does not match"):
        stmt.require_subject("ef" * 32)
    old = json.dumps(
        {
            "_type": "https://in-toto.io/Statement/v0.1",
            "subject": [{"digest": {"sha256": "ab"}}],
            "predicateType": "p",
        }
    ).encode()
    with pytest.raises(Rejected, match="unsupported in-toto statement type"):
        Statement.from_bytes(old)
    assert Statement.from_bytes(old, allow_v01=True).predicate == {}


@pytest.mark.parametrize("kind", keys.KINDS)
def test_signature_over_the_raw_payload_is_rejected(kind: str) -> None:
    """DSSE signs PAE(type, payload): a signature over the bare payload binds no payload type,
    so it must not verify (a verifier that also tried the raw payload would accept it)."""
    key = keys.shared(kind)
    payload = statement([("f", "ab" * 32)], "https://p.test/v1", {})
    raw = Envelope(INTOTO_PAYLOAD_TYPE, payload, (Signature(_key_sign(key, payload)),))
    with pytest.raises(Rejected, match="no DSSE signature verifies"):
        verify_envelope(raw, [TrustedKey.from_pem(keys.public_pem(key))])


def test_envelope_fields() -> None:
    doc = {
        "payloadType": "t/x",
        "payload": base64.b64encode(b"p").decode(),
        "signatures": [
            {"sig": "AQI=", "keyid": "k1"},
            {"sig": "AwQ=", "keyid": 7},
            {"sig": "BQ=="},
        ],
    }
    env = Envelope.from_dict(doc)
    assert (env.payload_type, env.payload) == ("t/x", b"p")
    assert env.signatures == (
        Signature(b"\x01\x02", "k1"),
        Signature(b"\x03\x04"),
        Signature(b"\x05"),
    )
    assert env.pae() == pae("t/x", b"p")
    again = Envelope.from_json(env.to_json())
    assert again == env and env.to_json().endswith("}\n")
    assert json.loads(env.to_json())["signatures"][0] == {"keyid": "k1", "sig": "AQI="}
    for bad in (
        dict(doc, payloadType=""),
        dict(doc, payloadType=5),
        dict(doc, payload=5),
        dict(doc, signatures={}),
        dict(doc, signatures=["AQI="]),
    ):
        with pytest.raises(Rejected):
            Envelope.from_dict(bad)
    with pytest.raises(Rejected, match="base64 value is not a string"):
        b64decode(5)  # type: ignore[arg-type]


def test_p384_envelopes_use_sha384() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    private = ec.generate_private_key(ec.SECP384R1())
    env = sign_envelope("t/x", b"payload", private)
    public = private.public_key()
    public.verify(env.signatures[0].sig, env.pae(), ec.ECDSA(hashes.SHA384()))
    assert verify_envelope(env, [TrustedKey.from_public_key(public)])


def test_rsa_envelopes_use_pss_and_other_keys_are_refused() -> None:
    from cryptography.hazmat.primitives.asymmetric import dsa

    private = keys.shared("rsa")
    env = sign_envelope("t/x", b"payload", private, keyid="rsa-1")
    assert env.signatures[0].keyid == "rsa-1"
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)
    private.public_key().verify(env.signatures[0].sig, env.pae(), pss, hashes.SHA256())
    with pytest.raises(Rejected, match="unsupported public key type"):
        sign_envelope("t/x", b"payload", dsa.generate_private_key(key_size=2048))  # type: ignore[arg-type]


def test_every_signature_is_tried_with_every_key() -> None:
    """keyid is only a hint: a valid signature after an invalid one, or for the second key."""
    first, second = keys.shared("ecdsa"), keys.shared("ed25519")
    good = sign_envelope("t/x", b"payload", second).signatures[0]
    env = Envelope("t/x", b"payload", (Signature(b"\x00" * 64, "wrong"), good))
    trusted = [TrustedKey.from_pem(keys.public_pem(k)) for k in (first, second)]
    assert verify_envelope(env, trusted) == trusted[1]


def test_keys_that_no_verifier_accepts_cannot_sign() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    for weak in (
        ec.generate_private_key(ec.SECP521R1()),
        rsa.generate_private_key(public_exponent=65537, key_size=1024),
    ):
        with pytest.raises(Rejected, match="cannot sign with this key"):
            sign_envelope("t/x", b"payload", weak)


def test_envelopes_are_immutable_values_with_a_stable_json_form() -> None:

    env = sign_envelope("t/x", b"payload", keys.shared("ed25519"), keyid="k")
    with pytest.raises(AttributeError):
        env.payload = b"changed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        env.signatures[0].sig = b"changed"  # type: ignore[misc]
    assert not hasattr(env, "__dict__") and not hasattr(env.signatures[0], "__dict__")
    assert env.to_json().startswith('{\n  "payloadType": "t/x",\n  "payload": ')
    assert env.to_json().endswith("\n    }\n  ]\n}\n")
