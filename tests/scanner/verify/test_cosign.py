"""cosign image signatures and attestations (legacy tag form and v3 referrer bundles), and SLSA."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from scanner.model import OciDigest
from scanner.verify import cosign, cosign_tags
from scanner.verify.cosign import CosignLayer, ImageRef
from scanner.verify.dsse import ENVELOPE_MEDIA_TYPE, INTOTO_PAYLOAD_TYPE, sign_envelope
from scanner.verify.errors import Rejected
from scanner.verify.keys import TrustedKey
from scanner.verify.slsa import SLSA_PROVENANCE_V1
from scanner.verify.trust import (
    BuilderRule,
    IdentityRule,
    Scope,
    Signer,
    SlsaExpectation,
    TrustPolicy,
    UnsafeOption,
)
from scanner.verify.trusted_roots import SigstoreRoot
from tests.fixtures import keys
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore, b64, statement

REPO = "registry.acme.test/ml/train"
MANIFEST = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}'
IMAGE = ImageRef(REPO, OciDigest("sha256:" + hashlib.sha256(MANIFEST).hexdigest()))
OTHER = ImageRef(REPO, OciDigest("sha256:" + "ab" * 32))
BUILDER = "https://git.example.test/slsa/builder/.github/workflows/build.yml@refs/tags/v2"
SOURCE = "https://git.example.test/acme/ml"


@pytest.fixture(scope="module")
def key() -> Any:
    return keys.shared("ecdsa", "cosign")


def _policy(
    root: SigstoreRoot, key: Any, *, unsafe: bool = False, expect: bool = True
) -> TrustPolicy:
    signers = (
        Signer(
            "release-key",
            Scope((), ("registry.acme.test/ml/*",)),
            key=TrustedKey.from_pem(keys.public_pem(key)),
            unsafe=frozenset({UnsafeOption.IGNORE_TLOG}) if unsafe else frozenset(),
        ),
        Signer(
            "ci",
            Scope((), ("registry.acme.test/*",)),
            identity=IdentityRule(ISSUER, subject=SUBJECT),
        ),
    )
    builders = (
        BuilderRule(3, id=BUILDER, signers=("ci",)),
        BuilderRule(1, id_regex=r".*/local@.*"),
    )
    expectations = (
        (SlsaExpectation(("registry.acme.test/ml/*",), source_repo=SOURCE),) if expect else ()
    )
    return TrustPolicy(signers, (root,), builders, expectations)


def _sign(private: Any, data: bytes) -> bytes:
    signature: bytes = private.sign(data, ec.ECDSA(hashes.SHA256()))
    return signature


def simple_signing(digest: str, reference: str = REPO) -> bytes:
    return json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": reference},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        }
    ).encode()


def _layer(media_type: str, data: bytes, annotations: dict[str, str]) -> CosignLayer:
    return CosignLayer(media_type, data, annotations, "sha256:" + hashlib.sha256(data).hexdigest())


def key_signature(
    instance: PrivateSigstore, key: Any, payload: bytes, *, logged: bool = True
) -> CosignLayer:
    signature = _sign(key, payload)
    ann = {cosign.ANN_SIGNATURE: b64(signature)}
    if logged:
        body = instance.hashedrekord_body(
            hashlib.sha256(payload).digest(), signature, keys.public_pem(key)
        )
        ann[cosign.ANN_BUNDLE] = instance.cosign_bundle_annotation(body)
    return _layer(cosign.SIMPLESIGNING_MEDIA_TYPE, payload, ann)


def keyless_signature(
    instance: PrivateSigstore, payload: bytes, subject: str = SUBJECT
) -> CosignLayer:
    leaf_key, cert = instance.issue(subject)
    signature = _sign(leaf_key, payload)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    body = instance.hashedrekord_body(hashlib.sha256(payload).digest(), signature, pem)
    chain = b"".join(
        c.public_bytes(serialization.Encoding.PEM)
        for c in (instance.inter_cert, instance.root_cert)
    )
    return _layer(
        cosign.SIMPLESIGNING_MEDIA_TYPE,
        payload,
        {
            cosign.ANN_SIGNATURE: b64(signature),
            cosign.ANN_CERTIFICATE: pem.decode(),
            cosign.ANN_CHAIN: chain.decode(),
            cosign.ANN_BUNDLE: instance.cosign_bundle_annotation(body),
        },
    )


def provenance(digest: str = IMAGE.digest, builder: str = BUILDER, source: str = SOURCE) -> bytes:
    predicate = {
        "buildDefinition": {
            "buildType": "https://actions.github.io/buildtypes/workflow/v1",
            "externalParameters": {"workflow": {"repository": source, "ref": "refs/tags/v1"}},
            "resolvedDependencies": [{"uri": f"git+{source}@refs/tags/v1"}],
        },
        "runDetails": {"builder": {"id": builder}},
    }
    return statement([("image", digest.removeprefix("sha256:"))], SLSA_PROVENANCE_V1, predicate)


def key_attestation(
    instance: PrivateSigstore, key: Any, stmt: bytes, *, intoto: bool = False
) -> CosignLayer:
    envelope = sign_envelope(INTOTO_PAYLOAD_TYPE, stmt, key)
    doc = envelope.to_dict()
    sigs = [(envelope.signatures[0].sig, keys.public_pem(key))]
    body = (instance.intoto_body if intoto else instance.dsse_body)(doc, stmt, sigs)
    return _layer(
        ENVELOPE_MEDIA_TYPE,
        envelope.to_json().encode(),
        {
            cosign.ANN_BUNDLE: instance.cosign_bundle_annotation(body),
            cosign.ANN_PREDICATE_TYPE: json.loads(stmt)["predicateType"],
        },
    )


def test_tags() -> None:
    digest = "sha256:" + "0f" * 32
    assert cosign.signature_tag(digest) == f"sha256-{'0f' * 32}.sig"
    assert cosign.attestation_tag(digest) == f"sha256-{'0f' * 32}.att"
    assert cosign.referrers_fallback_tag(digest) == f"sha256-{'0f' * 32}"
    with pytest.raises(Rejected):
        cosign.signature_tag("sha512:00")


def test_tag_rule_is_shared_with_the_registry() -> None:
    """The leaf rule names tags for any digest the registry accepts (sha512 too); the verifier
    only checks sha256 images, and its tags come from the same rule."""
    assert cosign_tags.referrers_tag("sha512", "ab" * 64) == f"sha512-{'ab' * 64}"
    assert cosign_tags.signature_tag("sha512", "ab" * 64) == f"sha512-{'ab' * 64}.sig"
    assert cosign_tags.attestation_tag("sha256", "0f" * 32) == f"sha256-{'0f' * 32}.att"
    digest = "sha256:" + "0F" * 32
    assert cosign.signature_tag(digest) == cosign_tags.signature_tag("sha256", "0f" * 32)


def test_legacy_key_signature(instance: PrivateSigstore, root: SigstoreRoot, key: Any) -> None:
    layer = key_signature(instance, key, simple_signing(IMAGE.digest))
    accepted = cosign.verify_layer(layer, IMAGE, _policy(root, key))
    assert accepted.form == "legacy-signature" and accepted.signer.name == "release-key"
    assert accepted.signed_at is not None and accepted.unsafe == ()


def test_signature_for_another_image(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    # A valid signature of image OTHER, copied next to IMAGE: a replay.
    layer = key_signature(instance, key, simple_signing(OTHER.digest))
    with pytest.raises(Rejected, match="copied from another image"):
        cosign.verify_layer(layer, IMAGE, _policy(root, key))


def test_tampered_payload_and_wrong_key(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    layer = key_signature(instance, key, simple_signing(IMAGE.digest))
    payload = simple_signing(IMAGE.digest, reference="evil.test/x")
    tampered = CosignLayer(layer.media_type, payload, layer.annotations)
    with pytest.raises(Rejected, match="does not verify with a trusted key"):
        cosign.verify_layer(tampered, IMAGE, _policy(root, key))
    with pytest.raises(Rejected, match="descriptor says"):
        cosign.verify_layer(
            CosignLayer(layer.media_type, payload, layer.annotations, layer.digest),
            IMAGE,
            _policy(root, key),
        )
    with pytest.raises(Rejected, match="does not verify with a trusted key"):
        cosign.verify_layer(layer, IMAGE, _policy(root, keys.generate("ecdsa")))


def test_out_of_scope_repository(instance: PrivateSigstore, root: SigstoreRoot, key: Any) -> None:
    image = ImageRef("docker.io/library/ubuntu", IMAGE.digest)
    layer = key_signature(instance, key, simple_signing(IMAGE.digest, "docker.io/library/ubuntu"))
    with pytest.raises(Rejected, match="no trusted signer may vouch for images of docker.io"):
        cosign.verify_layer(layer, image, _policy(root, key))


def test_missing_tlog_needs_explicit_unsafe(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any, caplog: pytest.LogCaptureFixture
) -> None:
    layer = key_signature(instance, key, simple_signing(IMAGE.digest), logged=False)
    with pytest.raises(Rejected, match="unsafe ignore-tlog"):
        cosign.verify_layer(layer, IMAGE, _policy(root, key))
    with caplog.at_level(logging.WARNING, logger="gpuprov.trust"):
        accepted = cosign.verify_layer(layer, IMAGE, _policy(root, key, unsafe=True))
    assert accepted.unsafe == ("ignore-tlog",)
    assert "UNSAFE ignore-tlog used for signer release-key" in caplog.text


def test_legacy_log_entry_of_another_signature(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    good = key_signature(instance, key, simple_signing(IMAGE.digest))
    other = key_signature(instance, key, simple_signing(OTHER.digest))
    mixed = dict(good.annotations)
    mixed[cosign.ANN_BUNDLE] = other.annotations[cosign.ANN_BUNDLE]
    with pytest.raises(Rejected, match="inconsistent"):
        cosign.verify_layer(_layer(good.media_type, good.data, mixed), IMAGE, _policy(root, key))


def test_legacy_keyless_signature(instance: PrivateSigstore, root: SigstoreRoot, key: Any) -> None:
    layer = keyless_signature(instance, simple_signing(IMAGE.digest))
    accepted = cosign.verify_layer(layer, IMAGE, _policy(root, key))
    assert accepted.signer.name == "ci" and SUBJECT in accepted.identity
    wrong = keyless_signature(instance, simple_signing(IMAGE.digest), subject=SUBJECT + "-fork")
    with pytest.raises(Rejected, match="is not trusted"):
        cosign.verify_layer(wrong, IMAGE, _policy(root, key))
    no_log = dict(layer.annotations)
    del no_log[cosign.ANN_BUNDLE]
    with pytest.raises(Rejected, match="no transparency log bundle"):
        cosign.verify_layer(_layer(layer.media_type, layer.data, no_log), IMAGE, _policy(root, key))


def test_legacy_keyless_from_untrusted_ca(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    rogue = PrivateSigstore(name="rogue", log_key=instance.log_key, ct_key=instance.ct_key)
    layer = keyless_signature(rogue, simple_signing(IMAGE.digest))
    with pytest.raises(Rejected, match="does not chain to trusted root"):
        cosign.verify_layer(layer, IMAGE, _policy(root, key))


def test_legacy_attestation_and_slsa(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    layer = key_attestation(instance, key, provenance(builder="https://b.test/local@v1"))
    policy = _policy(root, key)
    accepted = cosign.verify_layer(layer, IMAGE, policy)
    assert accepted.form == "legacy-attestation" and accepted.statement is not None
    verdict = cosign.evaluate_image(IMAGE, [layer], policy)
    assert verdict.slsa is not None and verdict.slsa.level == 1
    # The L3 builder may only be attested by the "ci" identity, not by this key.
    strict = cosign.evaluate_image(IMAGE, [key_attestation(instance, key, provenance())], policy)
    assert strict.slsa is None
    assert any("may not attest for builder" in r for r in strict.rejected)


def test_legacy_attestation_logged_as_intoto(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    stmt = provenance(builder="https://b.test/local@v1")
    layer = key_attestation(instance, key, stmt, intoto=True)
    assert cosign.verify_layer(layer, IMAGE, _policy(root, key)).form == "legacy-attestation"
    # The log entry of another attestation does not vouch for this one.
    other = key_attestation(
        instance, key, provenance(builder="https://c.test/local@v2"), intoto=True
    )
    mixed = dict(layer.annotations)
    mixed[cosign.ANN_BUNDLE] = other.annotations[cosign.ANN_BUNDLE]
    with pytest.raises(Rejected, match="another in-toto payload"):
        cosign.verify_layer(_layer(layer.media_type, layer.data, mixed), IMAGE, _policy(root, key))


def test_attestation_about_another_image(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    layer = key_attestation(instance, key, provenance(digest=OTHER.digest))
    with pytest.raises(Rejected, match="in-toto subject does not match"):
        cosign.verify_layer(layer, IMAGE, _policy(root, key))


def _referrer(bundle: dict[str, Any], content: str) -> CosignLayer:
    data = json.dumps(bundle).encode()
    return _layer(cosign.BUNDLE_MEDIA_TYPE, data, {cosign.ANN_BUNDLE_CONTENT: content})


def test_v3_referrer_signature_and_provenance(
    instance: PrivateSigstore, root: SigstoreRoot, key: Any
) -> None:
    hex_digest = IMAGE.digest.removeprefix("sha256:")
    sign_stmt = statement([("", hex_digest)], cosign.COSIGN_SIGN_PREDICATE, {})
    layers = [
        _referrer(instance.sign_dsse(sign_stmt), "dsse-envelope"),
        _referrer(instance.sign_dsse(provenance()), "dsse-envelope"),
        _referrer(instance.sign_blob(MANIFEST), "message-signature"),
        _referrer(
            instance.sign_dsse(provenance(builder="https://unknown.test/b")), "dsse-envelope"
        ),
        _referrer(
            instance.sign_dsse(provenance(source="https://git.example.test/evil/ml")),
            "dsse-envelope",
        ),
    ]
    verdict = cosign.evaluate_image(IMAGE, layers, _policy(root, key))
    assert [s.form for s in verdict.signatures] == ["bundle-signature", "bundle-signature"]
    assert verdict.signed and verdict.signer is not None and "ci" in verdict.signer
    assert verdict.slsa is not None
    assert (verdict.slsa.level, verdict.slsa.builder_id) == (3, BUILDER)
    assert verdict.slsa.source_repo is not None and SOURCE in verdict.slsa.source_repo
    reasons = " | ".join(verdict.rejected)
    assert "is not an allowed builder" in reasons
    assert "is not the expected https://git.example.test/acme/ml" in reasons


def test_v3_referrer_rejections(instance: PrivateSigstore, root: SigstoreRoot, key: Any) -> None:
    policy = _policy(root, key)
    other_sign = statement([("", "cd" * 32)], cosign.COSIGN_SIGN_PREDICATE, {})
    with pytest.raises(Rejected, match="in-toto subject does not match"):
        cosign.verify_layer(
            _referrer(instance.sign_dsse(other_sign), "dsse-envelope"), IMAGE, policy
        )
    with pytest.raises(Rejected, match="artifact differs"):
        cosign.verify_layer(
            _referrer(instance.sign_blob(b"another manifest"), "message-signature"), IMAGE, policy
        )
    with pytest.raises(Rejected, match="content annotation"):
        cosign.verify_layer(_referrer(instance.sign_blob(MANIFEST), "dsse-envelope"), IMAGE, policy)
    forked = instance.sign_dsse(provenance(), subject=SUBJECT + "-fork")
    with pytest.raises(Rejected, match="is not trusted"):
        cosign.verify_layer(_referrer(forked, "dsse-envelope"), IMAGE, policy)


def test_evaluate_collects_reasons(instance: PrivateSigstore, root: SigstoreRoot, key: Any) -> None:
    layers = [
        key_signature(instance, key, simple_signing(OTHER.digest)),
        CosignLayer("application/octet-stream", b"x"),
        CosignLayer(
            cosign.SIMPLESIGNING_MEDIA_TYPE,
            simple_signing(IMAGE.digest),
            {cosign.ANN_SIGNATURE: base64.b64encode(b"junk").decode()},
        ),
    ]
    verdict = cosign.evaluate_image(IMAGE, layers, _policy(root, key))
    assert not verdict.signed and verdict.signer is None and len(verdict.rejected) == 3
