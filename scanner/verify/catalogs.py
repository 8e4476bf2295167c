"""Signed reference catalogs: signing one, and turning a signed one into a verified catalog.

The verify side of `scanner.refcatalog` (which builds unsigned catalogs and owns their format).

A signed catalog is a DSSE envelope (key) or a Sigstore bundle with a DSSE envelope (keyless or
key, with a transparency log entry) whose payload is the catalog statement. Loading one checks
the signature and signer against the trust policy and drops entries outside the signer's scope.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from scanner.errors import VerifyError
from scanner.loaders import load_json
from scanner.refcatalog.model import Catalog, RefCatalogError
from scanner.verify.dsse import INTOTO_PAYLOAD_TYPE, Envelope, sign_envelope
from scanner.verify.errors import Rejected
from scanner.verify.provenance import VerifiedCatalog
from scanner.verify.sigstore_bundles import verify_bundle, verify_envelope_with_keys
from scanner.verify.trust import TrustPolicy

#: Environment variable holding the password of an encrypted PEM signing key.
PASSWORD_ENV = "GPUPROV_KEY_PASSWORD"


def load_private_key(path: Path) -> PrivateKeyTypes:
    """A PKCS#8/traditional PEM private key; encrypted ones take $GPUPROV_KEY_PASSWORD."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RefCatalogError(f"cannot read {path}: {e.strerror}") from e
    password = os.environ.get(PASSWORD_ENV)
    try:
        return serialization.load_pem_private_key(data, password.encode() if password else None)
    except TypeError as e:
        raise RefCatalogError(f"{path} is encrypted: set {PASSWORD_ENV}") from e
    except ValueError as e:
        raise RefCatalogError(f"{path} is not a usable PEM private key: {e}") from e


def sign_catalog(statement: bytes, key: PrivateKeyTypes, keyid: str = "") -> Envelope:
    """A DSSE envelope over a catalog statement (checked to be one before signing)."""
    Catalog.from_bytes(statement)
    try:
        return sign_envelope(INTOTO_PAYLOAD_TYPE, statement, key, keyid)
    except Rejected as e:
        raise RefCatalogError(str(e)) from e


def load_catalog(raw: bytes, policy: TrustPolicy, name: str) -> VerifiedCatalog:
    """Verify a signed catalog against `policy`; `Rejected` says why it is not trusted."""
    try:
        doc = load_json(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise Rejected(f"catalog {name} is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise Rejected(f"catalog {name} is not a JSON object")
    payload_type: str | None
    if "payloadType" in doc:
        signer, envelope = verify_envelope_with_keys(raw, policy)
        payload_type, payload, identity = envelope.payload_type, envelope.payload, signer.describe()
    elif "mediaType" in doc and "verificationMaterial" in doc:
        result = verify_bundle(raw, policy)
        if result.kind != "dsse" or result.payload is None:
            raise Rejected(f"catalog {name}: the bundle signs no DSSE statement")
        signer, payload_type, payload = result.signer, result.payload_type, result.payload
        identity = f"{signer.name} ({result.identity})"
    elif doc.get("_type"):
        raise Rejected(f"catalog {name} is not signed; sign it with `gpuprov catalog sign`")
    else:
        raise Rejected(f"catalog {name} is neither a DSSE envelope nor a Sigstore bundle")
    if payload_type != INTOTO_PAYLOAD_TYPE:
        raise Rejected(f"catalog {name}: payload type {payload_type!r} is not in-toto")
    try:
        catalog = Catalog.from_bytes(payload)
    except RefCatalogError as e:
        raise Rejected(f"catalog {name}: {e}") from e
    kept = tuple(e for e in catalog.entries if signer.scope.allows_family(e.family))
    return VerifiedCatalog(catalog.name or name, identity, kept, len(catalog.entries) - len(kept))


def load_catalog_file(path: Path, policy: TrustPolicy) -> VerifiedCatalog:
    """`load_catalog` for a file; the catalog's name defaults to the file name."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise VerifyError(f"cannot read catalog {path}: {e.strerror}") from e
    return load_catalog(raw, policy, path.name)
