"""A rescan's CycloneDX document, written again when the scan found exactly what it found before.

cyclonedx-python-lib is the encoder of record, and the dearest part of a warm rescan: importing
it and its models costs more than the rescan of a 7,000-file root itself (docs/benchmarks.md).
So a document it encoded is kept under the scan's cache directory, keyed by everything that
decides its bytes, and an identical scan writes it again with a fresh serial number and
timestamp, the only two values the library draws itself (both are formatted exactly as it
formats them; tests/scanner/bom/test_reuse.py holds the two paths byte-equal).

The key is the SHA-256 of: the scan result as MessagePack (equal values, equal bytes) less the
two fields no encoder reads (``started_at``, ``stats``: timings), the spec version, and who
encodes it: this package's version and the (path, size, mtime, inode) of the encoder's modules
and of the libraries it encodes with. Another result, spec or encoder is another key, never a
stale document.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from uuid import UUID, uuid4

import msgspec

from scanner import __version__
from scanner.fsutil import atomic_write
from scanner.model import ScanResult

#: Bumped when what a kept document holds changes.
FORMAT = "1"
#: Documents kept per cache directory (least recently written first out).
KEEP = 16
#: Fields of `ScanResult` that no encoder reads (tested): left out of the key.
VOLATILE = frozenset({"started_at", "stats"})
#: Stand-ins for the two fresh values in a kept document: a NUL is never in the library's JSON
#: (it escapes control characters), so neither can be mistaken for content.
_SERIAL = "\0serial\0"
_TIMESTAMP = "\0timestamp\0"
_ENCODER_MODULES = ("cyclonedx.py", "../vocabulary.py", "../imageref.py", "../model.py")
_ENCODER_LIBRARIES = ("cyclonedx", "py_serializable", "packageurl", "sortedcontainers")


def cyclonedx_json(
    result: ScanResult,
    spec_version: str,
    cache_dir: Path | None,
    *,
    serial_number: UUID | None = None,
    timestamp: datetime | None = None,
) -> str:
    """`scanner.bom.cyclonedx.to_json` of the result, through the document cache in
    ``cache_dir`` (None: no cache). Serial number and timestamp: fresh unless given."""
    serial_number = serial_number or uuid4()
    timestamp = timestamp or datetime.now(UTC)
    if cache_dir is None:
        return _encode(result, spec_version, serial_number, timestamp)
    path = cache_dir / "cyclonedx" / f"{_key(result, spec_version)}.json"
    template = _read(path)
    if template is not None:
        return _fill(template, serial_number, timestamp)
    text = _encode(result, spec_version, serial_number, timestamp)
    serial, stamp = json.dumps(serial_number.urn), json.dumps(timestamp.isoformat())
    if text.count(serial) == 1 and text.count(stamp) == 1:
        with contextlib.suppress(OSError):  # a cache that cannot be written is only slower
            _keep(path, text.replace(serial, _SERIAL).replace(stamp, _TIMESTAMP))
    return text


def _encode(result: ScanResult, spec_version: str, serial: UUID, timestamp: datetime) -> str:
    from scanner.bom.cyclonedx import to_json

    return to_json(result, spec_version, serial_number=serial, timestamp=timestamp)


def _fill(template: str, serial: UUID, timestamp: datetime) -> str:
    return template.replace(_SERIAL, json.dumps(serial.urn)).replace(
        _TIMESTAMP, json.dumps(timestamp.isoformat())
    )


def _key(result: ScanResult, spec_version: str) -> str:
    content = [getattr(result, f) for f in ScanResult.__struct_fields__ if f not in VOLATILE]
    digest = hashlib.sha256(f"{FORMAT}\n{spec_version}\n{_encoder()}\n".encode())
    # Equal values, equal bytes: a pickle also records which objects are shared, so the equal
    # result of a rescan (its strings read from the caches, not the tree) had another key.
    digest.update(msgspec.msgpack.encode(content))
    return digest.hexdigest()


def _encoder() -> str:
    """Who encodes: this version, and the files of the encoder and of its libraries."""
    here = Path(__file__).parent
    files = [os.path.normpath(here / m) for m in _ENCODER_MODULES]
    for name in _ENCODER_LIBRARIES:
        spec = find_spec(name)
        files.append(spec.origin if spec is not None and spec.origin else name)
    parts = [__version__]
    for file in files:
        try:
            st = os.stat(file)
        except OSError:
            parts.append(f"{file}:-")
            continue
        parts.append(f"{file}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
    return "\n".join(parts)


def _read(path: Path) -> str | None:
    """A kept template, or None (absent, unreadable, or not one this module wrote)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    if text.count(_SERIAL) != 1 or text.count(_TIMESTAMP) != 1:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: kept longest
    return text


def _keep(path: Path, template: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, template.encode("utf-8"))
    kept = sorted(path.parent.glob("*.json"), key=_mtime, reverse=True)
    for old in kept[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0
