"""Pinned Sigstore trusted roots (trusted_root.json): transparency-log and CT-log keys, Fulcio
CAs and timestamp authorities with their validity windows, and the public-good root shipped
with gpuprov or refreshed through TUF into the cache directory (`scanner.fsutil.cache_root`).
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from cryptography import x509
from msgspec import Struct

from scanner.errors import VerifyError
from scanner.fsutil import cache_root
from scanner.loaders import load_json
from scanner.verify.keys import TrustedKey

#: Name of the Sigstore public-good production root shipped with gpuprov.
PUBLIC_GOOD = "public-good"
_ROOT_FILE = "public-good.json"
#: Directory beside the refreshed root holding the TUF metadata that verified it.
_TUF_STATE = "public-good-tuf"


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 timestamp as used by Sigstore trusted roots."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {value}")
    return parsed


class LogKey(Struct, frozen=True):
    """A transparency log or CT log key from a trusted root, with its validity window."""

    key_id: bytes
    key: TrustedKey
    start: datetime | None
    end: datetime | None
    url: str

    def valid_at(self, when: datetime) -> bool:
        # Sigstore TimeRange is a closed interval (protobuf-specs sigstore_common.proto).
        return (self.start is None or self.start <= when) and (self.end is None or when <= self.end)


class CertificateAuthority(Struct, frozen=True):
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
            doc = load_json(raw)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            media = doc.get("mediaType", "")
            if not str(media).startswith("application/vnd.dev.sigstore.trustedroot"):
                raise ValueError(f"unexpected mediaType {media!r}")
            tlogs = tuple(_log_key(t) for t in doc.get("tlogs", []))
            ctlogs = tuple(_log_key(t) for t in doc.get("ctlogs", []))
            cas = tuple(_authority(c) for c in doc.get("certificateAuthorities", []))
            tsas = tuple(_tsa(t) for t in doc.get("timestampAuthorities", []))
        # AttributeError: a member of the wrong JSON type; RecursionError: absurd nesting.
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError, VerifyError) as e:
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
        # Imported here: the TUF client costs ~0.15 s and only a refreshed root needs it.
        from scanner.verify import tuf_refresh

        refreshed = cache_root() / "trust" / _ROOT_FILE
        if not refreshed.exists():
            data = resources.files("scanner.verify.roots").joinpath(_ROOT_FILE).read_bytes()
            return cls.from_bytes(data, PUBLIC_GOOD)
        pinned = pinned_tuf_root if pinned_tuf_root is not None else tuf_refresh.pinned_tuf_root()
        state = refreshed.parent / _TUF_STATE
        try:
            tuf_refresh.require_private(refreshed, cache_root())
            tuf_refresh.require_private(state, cache_root())
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
        # Imported here: sigstore-python is slow to import (see sigstore_bundles).
        from sigstore.models import TrustedRoot
        from sigstore_models.trustroot import v1 as trustroot_v1

        doc = load_json(self.raw)
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


def refresh_public_good(
    metadata_dir: Path, *, pinned_tuf_root: bytes | None = None
) -> tuple[Path, SigstoreRoot]:
    """Install the trusted_root.json that Sigstore's TUF metadata in `metadata_dir` vouches for
    as the public-good root in the cache; refused unless TUF verification from
    `pinned_tuf_root` (default: the TUF root shipped with gpuprov) succeeds.

    The previous pin and its metadata stay in place until the new ones are verified, so a
    refused refresh changes nothing.
    """
    from scanner.verify import tuf_refresh  # see SigstoreRoot.public_good

    pinned = pinned_tuf_root if pinned_tuf_root is not None else tuf_refresh.pinned_tuf_root()
    trust = cache_root() / "trust"
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


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise VerifyError(f"cannot read {path}: {e.strerror}") from e
