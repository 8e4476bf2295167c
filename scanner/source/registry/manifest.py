"""Manifests and indexes as a registry serves them: media types, size limits, and the fetched
document with its digest-checked bytes. Pure data, no network.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from msgspec import Struct

from scanner.errors import SourceError
from scanner.model import OciDigest
from scanner.source.oci import Descriptor

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
IMAGE_CONFIG_TYPES = (OCI_CONFIG, DOCKER_CONFIG)
#: The Accept header of manifest requests: every image manifest and index type.
ACCEPT = ", ".join((*MANIFEST_TYPES, *INDEX_TYPES))

MANIFEST_LIMIT = 4 * 1024 * 1024  # distribution's own cap on manifest size
CONFIG_LIMIT = 16 * 1024 * 1024


class Manifest(Struct, frozen=True):
    """A manifest or index as fetched: raw bytes (digest-checked), media type, parsed JSON."""

    digest: OciDigest
    media_type: str
    raw: bytes
    doc: dict[str, Any]

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def descriptors(self, key: str) -> tuple[Descriptor, ...]:
        """Parsed descriptors of ``manifests`` (index) or ``layers`` (manifest)."""
        items = self.doc.get(key)
        if not isinstance(items, list):
            return ()
        return tuple(Descriptor.parse(obj, f"manifest {self.digest}: {key}") for obj in items)

    @property
    def layers(self) -> tuple[Descriptor, ...]:
        return self.descriptors("layers")

    @property
    def config(self) -> Descriptor | None:
        obj = self.doc.get("config")
        return Descriptor.parse(obj, f"manifest {self.digest}: config") if obj else None

    @property
    def artifact_type(self) -> str | None:
        """``artifactType``, else the config media type (OCI 1.1 rule for referrers)."""
        value = self.doc.get("artifactType")
        if isinstance(value, str) and value:
            return value
        config = self.doc.get("config")
        media = config.get("mediaType") if isinstance(config, dict) else None
        return media if isinstance(media, str) else None

    @property
    def subject(self) -> OciDigest | None:
        subject = self.doc.get("subject")
        digest = subject.get("digest") if isinstance(subject, dict) else None
        return OciDigest(digest) if isinstance(digest, str) else None

    @property
    def annotations(self) -> dict[str, str]:
        value = self.doc.get("annotations")
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def parse_manifest(raw: bytes, digest: OciDigest, content_type: str | None, label: str) -> Manifest:
    """A `Manifest` from checked bytes; SourceError unless they are a JSON object."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise SourceError(f"manifest {label} is not valid JSON ({e})") from e
    if not isinstance(doc, dict):
        raise SourceError(f"manifest {label} is not a JSON object")
    return Manifest(digest, _media_type(content_type, doc), raw, doc)


def _media_type(content_type: str | None, doc: dict[str, Any]) -> str:
    header = (content_type or "").split(";", 1)[0].strip().lower()
    if header in (*MANIFEST_TYPES, *INDEX_TYPES):
        return header
    declared = doc.get("mediaType")
    if isinstance(declared, str) and declared:
        return declared
    if isinstance(doc.get("manifests"), list):
        return OCI_INDEX
    if isinstance(doc.get("layers"), list) or isinstance(doc.get("config"), dict):
        return OCI_MANIFEST
    return header


def digest_of(data: bytes, algorithm: str = "sha256") -> OciDigest:
    """``algorithm:<hex>`` of ``data``."""
    return OciDigest(f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}")
