"""On-disk cache of what each image layer yields, so shared base layers are read only once.

Entries are keyed by layer digest, the selector's version and this format's schema (plus a
fingerprint of the FileFacts model), written atomically and checked on read; a damaged entry
is ignored and rewritten by the next read of the layer.
"""

from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import fields

from scanner.fsutil import atomic_write, cache_root
from scanner.model import FileFacts, NodeKind, OciDigest, Skipped, Stage
from scanner.source.interface import Selector
from scanner.source.tarlayer import Entry, LayerYield

#: 2: the yield carries what the limits are checked against (compression, tar entries, ...).
SCHEMA = 2
_MAGIC = b"gpuprov-layer-cache\n"
_KINDS = {k.value: k for k in NodeKind}


def default_cache_dir() -> Path:
    """``layers`` under the scanner's cache root (`scanner.fsutil.cache_root`)."""
    return cache_root() / "layers"


def encode_value(value: object) -> object:
    """A frozen model value (Structs, tuples, scalars) as JSON-ready data."""
    return msgspec.to_builtins(value)


def decode_value(tp: Any, data: object) -> Any:
    """Rebuild a value of type ``tp`` from `encode_value` output; ValueError (msgspec's
    ValidationError) if it does not fit, field by field and type by type."""
    return msgspec.convert(data, tp)


def _fingerprint(tp: Any, seen: set[Any] | None = None) -> str:
    """A description of a type's shape, so a model change invalidates cached facts."""
    seen = seen if seen is not None else set()
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        if tp in seen:
            return tp.__name__
        seen.add(tp)
        inner = ",".join(f"{f.name}:{_fingerprint(f.type, seen)}" for f in fields(tp))
        return f"{tp.__name__}({inner})"
    args = typing.get_args(tp)
    if args:
        return f"{typing.get_origin(tp)}[{','.join(_fingerprint(a, seen) for a in args)}]"
    return repr(tp)


class LayerCache:
    """Layer yields stored under one directory, one file per (layer, selector version)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._model = _fingerprint(FileFacts)

    def _file(self, digest: OciDigest, selector: Selector) -> Path:
        key = "\0".join(
            (str(SCHEMA), self._model, digest, selector.version, str(selector.max_metadata_bytes))
        )
        name = hashlib.sha256(key.encode()).hexdigest()
        return self.directory / name[:2] / f"{name}.layer"

    def get(self, digest: OciDigest, selector: Selector) -> LayerYield | None:
        """The cached yield of ``digest``, or None when absent or unreadable."""
        try:
            raw = self._file(digest, selector).read_bytes()
        except OSError:
            return None
        try:
            return _decode(raw, digest)
        except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError):
            return None

    def put(self, layer: LayerYield, selector: Selector) -> bool:
        """Store a yield atomically; False (and nothing written) when that is impossible."""
        target = self._file(layer.digest, selector)
        try:
            payload = _encode(layer)
        except (TypeError, ValueError):
            return False
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Owner-only, like the directories: entries hold the images' metadata files.
            atomic_write(target, payload, mode=0o600)
        except OSError:
            return False
        return True


def _encode(layer: LayerYield) -> bytes:
    metadata = list(layer.metadata.items())
    header = {
        "digest": layer.digest,
        "entries": [[p, k.value, s, m, link, hard] for p, k, s, m, link, hard in layer.entries],
        "whiteouts": layer.whiteouts,
        "opaque": layer.opaque,
        "candidates": layer.candidates,
        "facts": {p: encode_value(f) for p, f in layer.facts.items()},
        "metadata": [[p, len(data)] for p, data in metadata],
        "skipped": [[s.path, s.reason, s.stage] for s in layer.skipped],
        "compressed": layer.compressed_bytes,
        "expanded": layer.expanded_bytes,
        "compression": layer.compression,
        "tar_entries": layer.tar_entries,
        "largest_header": layer.largest_header,
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    parts = [_MAGIC, len(head).to_bytes(8, "big"), head, *(data for _, data in metadata)]
    body = b"".join(parts)
    return body + hashlib.sha256(body).digest()


def _decode(raw: bytes, digest: OciDigest) -> LayerYield:
    body, check = raw[:-32], raw[-32:]
    if not raw.startswith(_MAGIC) or hashlib.sha256(body).digest() != check:
        raise ValueError("damaged cache entry")
    pos = len(_MAGIC)
    size = int.from_bytes(body[pos : pos + 8], "big")
    pos += 8
    header = json.loads(body[pos : pos + size])
    pos += size
    if header["digest"] != digest:
        raise ValueError("cache entry for another layer")
    entries: list[Entry] = [
        (str(p), _KINDS[k], int(s), int(m), link, hard)
        for p, k, s, m, link, hard in header["entries"]
    ]
    metadata: dict[str, bytes] = {}
    for path, length in header["metadata"]:
        metadata[path] = body[pos : pos + length]
        pos += length
    if pos != len(body):
        raise ValueError("cache entry length mismatch")
    return LayerYield(
        digest=digest,
        entries=entries,
        whiteouts=list(header["whiteouts"]),
        opaque=list(header["opaque"]),
        candidates=[str(p) for p in header["candidates"]],
        facts={p: decode_value(FileFacts, f) for p, f in header["facts"].items()},
        metadata=metadata,
        skipped=[Skipped(p, r, Stage(s)) for p, r, s in header["skipped"]],
        compressed_bytes=int(header["compressed"]),
        expanded_bytes=int(header["expanded"]),
        compression=_compression(header["compression"]),
        tar_entries=int(header["tar_entries"]),
        largest_header=int(header["largest_header"]),
    )


def _compression(value: object) -> str:
    if value not in ("gzip", "zstd", "tar"):
        raise ValueError(f"unknown compression {value!r}")
    return str(value)
