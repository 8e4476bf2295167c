"""Trust policy: which keys and keyless identities gpuprov trusts, for what, under which roots.

Loaded from YAML (`--trust FILE`) and used by every signature check in the verify stage and by
the service. It fails closed: a policy that trusts no signer is an error, and anything that
weakens verification is an explicit, logged `UnsafeOption`.
"""

from __future__ import annotations

import base64
import dataclasses
import fnmatch
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from scanner.errors import VerifyError

_log = logging.getLogger("gpuprov.trust")

#: Name of the Sigstore public-good production root shipped with gpuprov.
PUBLIC_GOOD = "public-good"
_ROOT_FILE = "public-good.json"
#: Directory beside the refreshed root holding the TUF metadata that verified it.
_TUF_STATE = "public-good-tuf"


class Rejected(VerifyError):
    """A signature, signer or statement was checked and refused; the message says why."""


class UnsafeOption(StrEnum):
    """A named weakening of verification that a policy must ask for explicitly."""

    #: Accept key signatures that carry no transparency-log proof (NGC-style cosign keys).
    IGNORE_TLOG = "ignore-tlog"


class KeyAlgorithm(StrEnum):
    ECDSA_P256 = "ecdsa-p256"
    ECDSA_P384 = "ecdsa-p384"
    ED25519 = "ed25519"
    RSA = "rsa"


PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | rsa.RSAPublicKey


def cache_dir() -> Path:
    """The only directory gpuprov writes to outside explicit output paths."""
    if env := os.environ.get("GPUPROV_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuprov"


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp as used by Sigstore trusted roots."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {value}")
    return parsed


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """A public key with the algorithm gpuprov accepts it for."""

    public_key: PublicKey
    algorithm: KeyAlgorithm
    key_id: str  # hex SHA-256 of the DER SubjectPublicKeyInfo

    @classmethod
    def from_public_key(cls, key: object) -> TrustedKey:
        """Accept ECDSA P-256/P-384, Ed25519 and RSA (2048 bits or more); refuse the rest."""
        if isinstance(key, ec.EllipticCurvePublicKey):
            curves = {"secp256r1": KeyAlgorithm.ECDSA_P256, "secp384r1": KeyAlgorithm.ECDSA_P384}
            if key.curve.name not in curves:
                raise VerifyError(f"unsupported elliptic curve {key.curve.name}")
            algorithm = curves[key.curve.name]
            public: PublicKey = key
        elif isinstance(key, ed25519.Ed25519PublicKey):
            algorithm, public = KeyAlgorithm.ED25519, key
        elif isinstance(key, rsa.RSAPublicKey):
            if key.key_size < 2048:
                raise VerifyError(f"RSA key of {key.key_size} bits is too small (need 2048)")
            algorithm, public = KeyAlgorithm.RSA, key
        else:
            raise VerifyError(f"unsupported public key type {type(key).__name__}")
        der = public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return cls(public, algorithm, hashlib.sha256(der).hexdigest())

    @classmethod
    def from_pem(cls, pem: bytes) -> TrustedKey:
        """Load a PEM public key (or the key of a PEM certificate)."""
        try:
            if b"-----BEGIN CERTIFICATE-----" in pem:
                return cls.from_public_key(x509.load_pem_x509_certificate(pem).public_key())
            return cls.from_public_key(serialization.load_pem_public_key(pem))
        except (ValueError, UnsupportedAlgorithm) as e:
            raise VerifyError(f"not a PEM public key: {e}") from e

    @classmethod
    def from_der(cls, der: bytes) -> TrustedKey:
        try:
            return cls.from_public_key(serialization.load_der_public_key(der))
        except (ValueError, UnsupportedAlgorithm) as e:
            raise VerifyError(f"not a DER public key: {e}") from e

    @property
    def spki_der(self) -> bytes:
        return self.public_key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def _hash(self) -> hashes.HashAlgorithm:
        return hashes.SHA384() if self.algorithm is KeyAlgorithm.ECDSA_P384 else hashes.SHA256()

    def verify(self, signature: bytes, data: bytes) -> bool:
        """True when `signature` is valid over `data` with this key."""
        key = self.public_key
        try:
            if isinstance(key, ec.EllipticCurvePublicKey):
                key.verify(signature, data, ec.ECDSA(self._hash()))
            elif isinstance(key, ed25519.Ed25519PublicKey):
                key.verify(signature, data)
            else:
                return _rsa_verify(key, signature, data, hashes.SHA256())
        except (InvalidSignature, ValueError):
            return False
        return True

    def verify_digest(self, signature: bytes, digest: bytes) -> bool:
        """True when `signature` is valid over the SHA-256 `digest` (pre-hashed signing).

        Ed25519 signs the whole message, never a digest: such keys need the artifact itself.
        """
        key = self.public_key
        prehashed = Prehashed(hashes.SHA256())
        try:
            if isinstance(key, ec.EllipticCurvePublicKey):
                key.verify(signature, digest, ec.ECDSA(prehashed))
            elif isinstance(key, rsa.RSAPublicKey):
                return _rsa_verify(key, signature, digest, prehashed)
            else:
                raise Rejected(
                    "an Ed25519 signature covers the whole artifact; give the file, not its digest"
                )
        except (InvalidSignature, ValueError):
            return False
        return True

    def describe(self) -> str:
        return f"{self.algorithm.value} key sha256:{self.key_id[:16]}"


def _rsa_verify(
    key: rsa.RSAPublicKey,
    signature: bytes,
    data: bytes,
    algorithm: hashes.HashAlgorithm | Prehashed,
) -> bool:
    # Both paddings are in use for RSA signing keys (cosign: PKCS#1 v1.5, securesystemslib: PSS).
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.AUTO)
    for pad in (padding.PKCS1v15(), pss):
        try:
            key.verify(signature, data, pad, algorithm)
            return True
        except InvalidSignature:
            continue
    return False


@dataclass(frozen=True, slots=True)
class IdentityRule:
    """A keyless identity: the OIDC issuer exactly, the subject exactly or by full-match regex."""

    issuer: str
    subject: str | None = None
    subject_regex: str | None = None

    def __post_init__(self) -> None:
        if (self.subject is None) == (self.subject_regex is None):
            raise VerifyError("a keyless identity needs exactly one of subject, subject_regex")
        if not self.issuer:
            raise VerifyError("a keyless identity needs an OIDC issuer")
        if self.subject_regex is not None:
            try:
                re.compile(self.subject_regex)
            except re.error as e:
                raise VerifyError(f"bad subject_regex {self.subject_regex!r}: {e}") from e

    def matches(self, issuer: str | None, subjects: Iterable[str]) -> bool:
        """Issuer must be equal; one subject must be equal or fully match the regex."""
        if issuer != self.issuer:
            return False
        if self.subject is not None:
            return self.subject in subjects
        assert self.subject_regex is not None
        # fullmatch: the regex is anchored at both ends whatever the author wrote.
        return any(re.fullmatch(self.subject_regex, s) for s in subjects)

    def describe(self) -> str:
        subject = self.subject if self.subject is not None else f"/{self.subject_regex}/"
        return f"{subject} (issuer {self.issuer})"


@dataclass(frozen=True, slots=True)
class Scope:
    """What a signer may vouch for: library families and image repositories ("*" = any)."""

    families: tuple[str, ...] = ()
    images: tuple[str, ...] = ()

    def allows_family(self, family: str | None) -> bool:
        if "*" in self.families:
            return True
        return family is not None and family.lower() in {f.lower() for f in self.families}

    def allows_image(self, repository: str) -> bool:
        return any(fnmatch.fnmatchcase(repository, pattern) for pattern in self.images)


@dataclass(frozen=True, slots=True)
class Signer:
    """One trusted signer: a key or a keyless identity, with its scope and unsafe options."""

    name: str
    scope: Scope
    key: TrustedKey | None = None
    identity: IdentityRule | None = None
    unsafe: frozenset[UnsafeOption] = frozenset()

    def __post_init__(self) -> None:
        if (self.key is None) == (self.identity is None):
            raise VerifyError(f"signer {self.name!r} needs exactly one of a key or an identity")

    def describe(self) -> str:
        """The identity shown to users and recorded in BOMs."""
        if self.key is not None:
            return f"{self.name} ({self.key.describe()})"
        assert self.identity is not None
        return f"{self.name} ({self.identity.describe()})"

    def allows_unsafe(self, option: UnsafeOption, context: str) -> bool:
        """Whether the policy opted into `option` for this signer; every use is logged."""
        if option in self.unsafe:
            _log.warning("UNSAFE %s used for signer %s: %s", option.value, self.name, context)
            return True
        return False


@dataclass(frozen=True, slots=True)
class LogKey:
    """A transparency log or CT log key from a trusted root, with its validity window."""

    key_id: bytes
    key: TrustedKey
    start: datetime | None
    end: datetime | None
    url: str

    def valid_at(self, when: datetime) -> bool:
        # Sigstore TimeRange is a closed interval (protobuf-specs sigstore_common.proto).
        return (self.start is None or self.start <= when) and (self.end is None or when <= self.end)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A Fulcio CA chain (leaf-most first) from a trusted root, with its validity window."""

    certificates: tuple[x509.Certificate, ...]
    start: datetime | None
    end: datetime | None
    uri: str

    def valid_at(self, when: datetime) -> bool:
        return (self.start is None or self.start <= when) and (self.end is None or when <= self.end)


@dataclass(frozen=True)
class SigstoreRoot:
    """A pinned Sigstore trusted root (trusted_root.json), parsed once at load."""

    name: str
    raw: bytes = field(repr=False)
    tlogs: tuple[LogKey, ...]
    ctlogs: tuple[LogKey, ...]
    authorities: tuple[CertificateAuthority, ...]
    tsa_chains: tuple[tuple[tuple[x509.Certificate, ...], datetime | None, datetime | None], ...]

    @classmethod
    def from_bytes(cls, raw: bytes, name: str) -> SigstoreRoot:
        """Parse and check a trusted root; the sigstore-python view is built once to validate."""
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            media = doc.get("mediaType", "")
            if not str(media).startswith("application/vnd.dev.sigstore.trustedroot"):
                raise ValueError(f"unexpected mediaType {media!r}")
            tlogs = tuple(_log_key(t) for t in doc.get("tlogs", []))
            ctlogs = tuple(_log_key(t) for t in doc.get("ctlogs", []))
            cas = tuple(_authority(c) for c in doc.get("certificateAuthorities", []))
            tsas = tuple(_tsa(t) for t in doc.get("timestampAuthorities", []))
        except (ValueError, KeyError, TypeError, VerifyError) as e:
            raise VerifyError(f"trusted root {name} is invalid: {e}") from e
        if not tlogs:
            raise VerifyError(f"trusted root {name} lists no transparency log")
        root = cls(name, raw, tlogs, ctlogs, cas, tsas)
        root.sigstore()  # fail at load, not at the first verification
        return root

    @classmethod
    def from_file(cls, path: Path) -> SigstoreRoot:
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise VerifyError(f"cannot read trusted root {path}: {e.strerror}") from e
        return cls.from_bytes(raw, str(path))

    @classmethod
    def public_good(cls, *, pinned_tuf_root: bytes | None = None) -> SigstoreRoot:
        """The production root: a refreshed copy in the cache directory, else the shipped one.

        A refreshed copy is used only when it is private to this user and re-verifies against
        the TUF metadata kept beside it, chained from `pinned_tuf_root` (default: the TUF root
        shipped with gpuprov); otherwise loading fails, never falling back silently.
        """
        from scanner.verify import tuf_refresh

        refreshed = cache_dir() / "trust" / _ROOT_FILE
        if not refreshed.exists():
            data = resources.files("scanner.verify.roots").joinpath(_ROOT_FILE).read_bytes()
            return cls.from_bytes(data, PUBLIC_GOOD)
        pinned = pinned_tuf_root if pinned_tuf_root is not None else tuf_refresh.pinned_tuf_root()
        state = refreshed.parent / _TUF_STATE
        try:
            tuf_refresh.require_private(refreshed, cache_dir())
            tuf_refresh.require_private(state, cache_dir())
            data = _read(refreshed)
            tuf_refresh.recheck(state, pinned, data)
        except VerifyError as e:
            raise VerifyError(
                f"the refreshed public-good root {refreshed} cannot be trusted: {e}; "
                "run `gpuprov trust refresh-root` again or delete it to use the shipped root"
            ) from e
        return cls.from_bytes(data, f"{PUBLIC_GOOD} ({refreshed})")

    def sigstore(self) -> Any:
        """This root as a sigstore-python `TrustedRoot`."""
        cached = self.__dict__.get("_sigstore")
        if cached is not None:
            return cached
        from sigstore.models import TrustedRoot
        from sigstore_models.trustroot import v1 as trustroot_v1

        doc = json.loads(self.raw)
        # sigstore-python 4.5 compares TSA validity ends with "<" although TimeRange is closed
        # (protobuf-specs; conformance case trust-root-tsa-validity-end-inclusive). Moving each
        # end by the 1 µs datetime resolution turns its "<" into the spec's "<=", exactly.
        for tsa in doc.get("timestampAuthorities", []):
            end = tsa.get("validFor", {}).get("end")
            if end:
                moved = parse_time(end) + timedelta(microseconds=1)
                tsa["validFor"]["end"] = moved.isoformat().replace("+00:00", "Z")
        try:
            built = TrustedRoot(trustroot_v1.TrustedRoot.from_json(json.dumps(doc)))
        except Exception as e:  # pydantic and sigstore errors alike
            raise VerifyError(f"trusted root {self.name} is invalid: {_brief(e)}") from e
        self.__dict__["_sigstore"] = built
        return built

    def tlog(self, key_id: bytes) -> LogKey | None:
        return next((t for t in self.tlogs if t.key_id == key_id), None)

    def ctlog(self, key_id: bytes) -> LogKey | None:
        return next((t for t in self.ctlogs if t.key_id == key_id), None)


def _brief(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _window(obj: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    valid = obj.get("validFor") or {}
    start = parse_time(valid["start"]) if valid.get("start") else None
    end = parse_time(valid["end"]) if valid.get("end") else None
    return start, end


def _log_key(obj: Mapping[str, Any]) -> LogKey:
    public = obj["publicKey"]
    key = TrustedKey.from_der(base64.b64decode(public["rawBytes"]))
    start, end = _window(public)
    if start is None:
        raise ValueError(f"log {obj.get('baseUrl')} key has no validFor.start")
    return LogKey(base64.b64decode(obj["logId"]["keyId"]), key, start, end, obj.get("baseUrl", ""))


def _certs(obj: Mapping[str, Any]) -> tuple[x509.Certificate, ...]:
    return tuple(
        x509.load_der_x509_certificate(base64.b64decode(c["rawBytes"]))
        for c in obj["certChain"]["certificates"]
    )


def _authority(obj: Mapping[str, Any]) -> CertificateAuthority:
    start, end = _window(obj)
    return CertificateAuthority(_certs(obj), start, end, obj.get("uri", ""))


def _tsa(
    obj: Mapping[str, Any],
) -> tuple[tuple[x509.Certificate, ...], datetime | None, datetime | None]:
    start, end = _window(obj)
    return _certs(obj), start, end


@dataclass(frozen=True, slots=True)
class BuilderRule:
    """An allowed SLSA builder and the highest Build level its provenance may claim."""

    level: int
    id: str | None = None
    id_regex: str | None = None
    signers: tuple[str, ...] = ()  # only these signers may attest for this builder

    def __post_init__(self) -> None:
        # SLSA Build L2+ means the build platform itself signs the provenance: a rule that lets
        # any trusted signer claim such a builder would let a project key forge its level.
        if self.level >= 2 and not self.signers:
            raise VerifyError(
                f"builder {self.id or self.id_regex} claims Build L{self.level}: name the "
                "signers (the build platform's identity) that may attest for it"
            )

    def matches(self, builder_id: str) -> bool:
        if self.id is not None:
            return builder_id == self.id
        return self.id_regex is not None and re.fullmatch(self.id_regex, builder_id) is not None


@dataclass(frozen=True, slots=True)
class SlsaExpectation:
    """What an image's provenance must state, when the policy states it."""

    images: tuple[str, ...]
    source_repo: str | None = None
    build_type: str | None = None
    min_level: int = 0

    def applies_to(self, repository: str) -> bool:
        return any(fnmatch.fnmatchcase(repository, p) for p in self.images)


@dataclass(frozen=True)
class TrustPolicy:
    """The whole trust policy: signers, pinned Sigstore roots and SLSA rules."""

    signers: tuple[Signer, ...]
    roots: tuple[SigstoreRoot, ...]
    builders: tuple[BuilderRule, ...] = ()
    expectations: tuple[SlsaExpectation, ...] = ()
    source: str = "<policy>"

    def __post_init__(self) -> None:
        if not self.signers:
            raise VerifyError(f"trust policy {self.source} trusts no signer (fail closed)")
        names = [s.name for s in self.signers]
        if len(set(names)) != len(names):
            raise VerifyError(f"trust policy {self.source} repeats a signer name")

    def key_signers(self) -> tuple[Signer, ...]:
        return tuple(s for s in self.signers if s.key is not None)

    def keyless_signers(self) -> tuple[Signer, ...]:
        return tuple(s for s in self.signers if s.identity is not None)

    def for_image(self, repository: str) -> tuple[Signer, ...]:
        """Signers allowed to vouch for images of `repository`."""
        return tuple(s for s in self.signers if s.scope.allows_image(repository))

    def signer(self, name: str) -> Signer:
        for s in self.signers:
            if s.name == name:
                return s
        raise KeyError(name)

    @classmethod
    def for_key(cls, pem_path: Path) -> TrustPolicy:
        """The one-key policy of `--trust-key PUB.pem`: that key, for every family and image."""
        key = TrustedKey.from_pem(_read(pem_path))
        signer = Signer(pem_path.name, Scope(("*",), ("*",)), key=key)
        return cls((signer,), (), source=f"--trust-key {pem_path}")

    @classmethod
    def for_identity(
        cls,
        issuer: str,
        roots: Sequence[SigstoreRoot],
        *,
        subject: str | None = None,
        subject_regex: str | None = None,
    ) -> TrustPolicy:
        """The one-identity policy of `gpuprov verify --certificate-identity ...`."""
        rule = IdentityRule(issuer, subject, subject_regex)
        signer = Signer(rule.describe(), Scope(("*",), ("*",)), identity=rule)
        return cls((signer,), tuple(roots), source="command line")

    @classmethod
    def from_file(cls, path: Path) -> TrustPolicy:
        """Load a YAML trust policy; relative paths in it are relative to the file."""
        try:
            data = yaml.safe_load(_read(path))
        except yaml.YAMLError as e:
            raise VerifyError(f"trust policy {path} is not valid YAML: {e}") from e
        return cls.from_dict(data, base_dir=path.parent, source=str(path))

    @classmethod
    def from_bytes(
        cls, raw: bytes, *, source: str = "<policy>", base_dir: Path | None = None
    ) -> TrustPolicy:
        """Load a YAML trust policy from bytes. Without `base_dir` (the service) keys and roots
        must be inline (`key_pem`, `trusted_root`): a file reference is refused."""
        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise VerifyError(f"trust policy {source} is not valid YAML: {e}") from e
        return cls.from_dict(data, base_dir=base_dir, source=source)

    @classmethod
    def from_dict(
        cls, data: object, *, base_dir: Path | None = Path("."), source: str = "<policy>"
    ) -> TrustPolicy:
        """Build a policy from its parsed YAML document (schema in docs/provenance.md);
        `base_dir=None` accepts inline keys and roots only."""
        doc = _mapping(data, "policy", {"version", "roots", "signers", "slsa"}, source)
        if doc.get("version", 1) != 1:
            raise VerifyError(f"{source}: unsupported policy version {doc.get('version')!r}")
        roots = tuple(_root_entry(r, base_dir, source) for r in doc.get("roots") or [PUBLIC_GOOD])
        signers = tuple(_signer(s, base_dir, source) for s in _list(doc.get("signers"), source))
        slsa = _mapping(doc.get("slsa") or {}, "slsa", {"builders", "expect"}, source)
        builders = tuple(_builder(b, source) for b in _list(slsa.get("builders"), source))
        expect = tuple(_expectation(e, source) for e in _list(slsa.get("expect"), source))
        for b in builders:
            for name in b.signers:
                if name not in {s.name for s in signers}:
                    raise VerifyError(f"{source}: builder rule names unknown signer {name!r}")
        return cls(signers, roots, builders, expect, source)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise VerifyError(f"cannot read {path}: {e.strerror}") from e


def _mapping(obj: object, what: str, allowed: set[str], source: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise VerifyError(f"{source}: {what} must be a mapping")
    unknown = set(obj) - allowed
    if unknown:
        raise VerifyError(f"{source}: unknown key(s) in {what}: {', '.join(sorted(unknown))}")
    return obj


def _list(obj: object, source: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise VerifyError(f"{source}: expected a list, got {type(obj).__name__}")
    return obj


def _strings(obj: object, what: str, source: str) -> tuple[str, ...]:
    items = [obj] if isinstance(obj, str) else _list(obj, source)
    if not all(isinstance(i, str) and i for i in items):
        raise VerifyError(f"{source}: {what} must be a list of non-empty strings")
    return tuple(items)


def _root_entry(obj: object, base_dir: Path | None, source: str) -> SigstoreRoot:
    if obj == PUBLIC_GOOD:
        return SigstoreRoot.public_good()
    entry = _mapping(obj, "root", {"path", "name", "trusted_root"}, source)
    if "trusted_root" in entry:  # inline trusted_root.json: a JSON string or the YAML mapping
        inline = entry["trusted_root"]
        raw = inline.encode() if isinstance(inline, str) else json.dumps(inline).encode()
        return SigstoreRoot.from_bytes(raw, str(entry.get("name") or "inline root"))
    if not isinstance(entry.get("path"), str):
        raise VerifyError(
            f"{source}: a root needs a path or trusted_root (or is the string {PUBLIC_GOOD!r})"
        )
    if base_dir is None:
        raise VerifyError(
            f"{source}: root {entry['path']!r} is a file reference; give its JSON inline as "
            "trusted_root"
        )
    root = SigstoreRoot.from_file(base_dir / entry["path"])
    return root if not entry.get("name") else SigstoreRoot.from_bytes(root.raw, entry["name"])


_SIGNER_KEYS = {
    "name",
    "key",
    "key_pem",
    "issuer",
    "subject",
    "subject_regex",
    "families",
    "images",
    "unsafe",
}


def _signer(obj: object, base_dir: Path | None, source: str) -> Signer:
    entry = _mapping(obj, "signer", _SIGNER_KEYS, source)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise VerifyError(f"{source}: every signer needs a name")
    where = f"{source}: signer {name!r}"
    scope = Scope(
        _strings(entry.get("families", []), "families", where),
        _strings(entry.get("images", []), "images", where),
    )
    if not scope.families and not scope.images:
        raise VerifyError(f"{where} may vouch for nothing: give families and/or images")
    try:
        unsafe = frozenset(
            UnsafeOption(u) for u in _strings(entry.get("unsafe", []), "unsafe", where)
        )
    except ValueError as e:
        raise VerifyError(f"{where}: {e}") from e
    for option in unsafe:
        _log.warning("trust policy %s: signer %s enables UNSAFE %s", source, name, option.value)
    key = None
    if "key" in entry or "key_pem" in entry:
        if "key_pem" in entry:
            pem = entry["key_pem"].encode()
        elif base_dir is None:
            raise VerifyError(f"{where}: key {entry['key']!r} is a file; inline it as key_pem")
        else:
            pem = _read(base_dir / entry["key"])
        try:
            key = TrustedKey.from_pem(pem)
        except VerifyError as e:
            raise VerifyError(f"{where}: {e}") from e
    identity = None
    if "issuer" in entry:
        try:
            identity = IdentityRule(
                entry["issuer"], entry.get("subject"), entry.get("subject_regex")
            )
        except VerifyError as e:
            raise VerifyError(f"{where}: {e}") from e
    try:
        return Signer(name, scope, key, identity, unsafe)
    except VerifyError as e:
        raise VerifyError(f"{source}: {e}") from e


def _builder(obj: object, source: str) -> BuilderRule:
    entry = _mapping(obj, "builder", {"id", "id_regex", "level", "signers"}, source)
    level = entry.get("level")
    if not isinstance(level, int) or not 0 <= level <= 3:
        raise VerifyError(f"{source}: builder level must be 0..3")
    if ("id" in entry) == ("id_regex" in entry):
        raise VerifyError(f"{source}: a builder needs exactly one of id, id_regex")
    if "id_regex" in entry:
        try:
            re.compile(entry["id_regex"])
        except re.error as e:
            raise VerifyError(f"{source}: bad builder id_regex: {e}") from e
    signers = _strings(entry.get("signers", []), "signers", source)
    try:
        return BuilderRule(level, entry.get("id"), entry.get("id_regex"), signers)
    except VerifyError as e:
        raise VerifyError(f"{source}: {e}") from e


def _expectation(obj: object, source: str) -> SlsaExpectation:
    entry = _mapping(
        obj, "expectation", {"images", "source_repo", "build_type", "min_level"}, source
    )
    images = _strings(entry.get("images"), "images", source)
    if not images:
        raise VerifyError(f"{source}: an SLSA expectation needs images")
    return SlsaExpectation(
        images, entry.get("source_repo"), entry.get("build_type"), int(entry.get("min_level", 0))
    )


def refresh_public_good(
    metadata_dir: Path, *, pinned_tuf_root: bytes | None = None
) -> tuple[Path, SigstoreRoot]:
    """Install the trusted_root.json that Sigstore's TUF metadata in `metadata_dir` vouches for
    as the public-good root in the cache; refused unless TUF verification from
    `pinned_tuf_root` (default: the TUF root shipped with gpuprov) succeeds.

    The previous pin and its metadata stay in place until the new ones are verified, so a
    refused refresh changes nothing.
    """
    from scanner.verify import tuf_refresh

    pinned = pinned_tuf_root if pinned_tuf_root is not None else tuf_refresh.pinned_tuf_root()
    trust = cache_dir() / "trust"
    trust.mkdir(parents=True, exist_ok=True)
    # Only this user may write what every signature check trusts (umask notwithstanding).
    trust.chmod(0o700)
    state = trust / _TUF_STATE
    work = Path(tempfile.mkdtemp(prefix=".refresh-", dir=trust))
    try:
        candidate = work / "state"
        if state.is_dir():
            shutil.copytree(state, candidate, symlinks=True)
        raw = tuf_refresh.verify_refresh(metadata_dir, candidate, pinned)
        root = SigstoreRoot.from_bytes(raw, f"TUF target {tuf_refresh.TARGET} of {metadata_dir}")
        if not root.authorities or not root.ctlogs:
            raise VerifyError(f"{metadata_dir}: the root lacks certificate authorities or CT logs")
        target = trust / _ROOT_FILE
        new_file = work / _ROOT_FILE
        new_file.write_bytes(raw)
        new_file.chmod(0o600)
        # Swap the metadata first: a crash between the two renames leaves a pin that fails its
        # re-check at load (an error that says to refresh again), never an unverified one.
        old = work / "old"
        if state.exists():
            state.rename(old)
        candidate.rename(state)
        new_file.replace(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target, SigstoreRoot.public_good(pinned_tuf_root=pinned)


def with_roots(policy: TrustPolicy, roots: Sequence[SigstoreRoot]) -> TrustPolicy:
    """A copy of `policy` whose pinned roots are replaced by `roots`."""
    return dataclasses.replace(policy, roots=tuple(roots))
