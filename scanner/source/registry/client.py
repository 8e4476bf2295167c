"""The OCI distribution pull API of one registry: manifests (digest-checked), blobs (streamed,
digest-checked) and `resolve`, which turns a reference into one image (the platform rule of
`scanner.source.platform` picks it from an index) with its config.
"""

from __future__ import annotations

import hashlib
import io
import json
from contextlib import closing
from dataclasses import dataclass, field
from typing import IO, Any, Self

import httpx

from scanner.errors import SourceError, UsageError
from scanner.imageref import ImageReference, split_digest
from scanner.model import OciDigest
from scanner.source.oci import Descriptor
from scanner.source.platform import check_config_platform, check_platform, choose_image, leaves
from scanner.source.registry.auth import Credentials, RegistryOptions
from scanner.source.registry.manifest import (
    ACCEPT,
    CONFIG_LIMIT,
    IMAGE_CONFIG_TYPES,
    INDEX_TYPES,
    MANIFEST_LIMIT,
    MANIFEST_TYPES,
    Manifest,
    digest_of,
    parse_manifest,
)
from scanner.source.registry.transport import CHUNK, BlobStream, Connection, read_limited, scope


class RegistryClient:
    """One registry host and its pull API. Use as a context manager.

    ``connection`` is the HTTP side (TLS policy, authentication, redirects); see
    `scanner.source.registry.transport.Connection` for when plain HTTP is allowed.
    """

    def __init__(
        self,
        registry: str,
        *,
        credentials: Credentials | None = None,
        ca_file: str | None = None,
        insecure: bool = False,
        plain_http: bool = False,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.connection = Connection(
            registry,
            credentials=credentials,
            ca_file=ca_file,
            insecure=insecure,
            plain_http=plain_http,
            timeout=timeout,
            transport=transport,
        )
        self.registry = registry

    @classmethod
    def for_reference(
        cls,
        ref: ImageReference,
        options: RegistryOptions | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> RegistryClient:
        """A client for ``ref``'s registry configured from ``options``."""
        options = options or RegistryOptions()
        return cls(
            ref.registry,
            credentials=options.credentials(ref.registry),
            ca_file=options.ca_file,
            insecure=options.insecure,
            plain_http=options.plain_http,
            timeout=options.timeout,
            transport=transport,
        )

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self) -> None:
        """Reach ``/v2/`` (choosing the scheme); SourceError when it cannot be reached."""
        self.connection.base()

    def get_manifest(
        self, repository: str, reference: str, *, accept: str = ACCEPT
    ) -> Manifest | None:
        """The manifest ``repository:reference`` (tag or digest), digest-checked; None on 404."""
        label = f"{self.registry}/{repository}{'@' if ':' in reference else ':'}{reference}"
        response = self.connection.send(
            "GET",
            f"/v2/{repository}/manifests/{reference}",
            label=label,
            scope=scope(repository),
            headers={"Accept": accept},
        )
        if response.status_code == 404:
            response.close()
            return None
        if response.status_code != 200:
            raise self.connection.fail(response, label, f"image not found: {label}")
        with closing(response):
            raw = read_limited(response, MANIFEST_LIMIT, f"manifest {label}")
            content_type = response.headers.get("content-type")
            header_digest = response.headers.get("docker-content-digest")
        if ":" in reference:  # by digest: the bytes must hash to it
            algorithm, expected = split_digest(reference)
            if hashlib.new(algorithm, raw).hexdigest() != expected:
                raise SourceError(
                    f"manifest {label} does not match its digest "
                    f"(the content hashes to {digest_of(raw, algorithm)})"
                )
            digest = OciDigest(reference)
        else:
            digest = digest_of(raw)
            if header_digest and header_digest.startswith("sha256:") and header_digest != digest:
                raise SourceError(
                    f"manifest {label}: the registry says {header_digest} but the content "
                    f"hashes to {digest}"
                )
        return parse_manifest(raw, digest, content_type, label)

    def open_blob(
        self, repository: str, digest: str, *, size: int | None = None, verify: bool = True
    ) -> IO[bytes]:
        """Stream a blob (redirects to storage followed); with ``verify`` the digest (and
        ``size`` when given) is checked as the end is read: SourceError naming the blob."""
        split_digest(digest)
        label = f"blob {digest} of {self.registry}/{repository}"
        response = self.connection.send(
            "GET", f"/v2/{repository}/blobs/{digest}", label=label, scope=scope(repository)
        )
        if response.status_code != 200:
            raise self.connection.fail(
                response, label, f"blob {digest} not found in {self.registry}/{repository}"
            )
        raw = BlobStream(response, OciDigest(digest), size, label, verify)
        return io.BufferedReader(raw, buffer_size=CHUNK)

    def read_blob(
        self, repository: str, digest: str, *, max_bytes: int = CONFIG_LIMIT, verify: bool = True
    ) -> bytes:
        """A small blob (config, signature layer) read whole and digest-checked (unless the
        caller checks it itself: ``verify=False``)."""
        stream = self.open_blob(repository, digest, verify=verify)
        try:
            data = stream.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise SourceError(
                    f"blob {digest} of {self.registry}/{repository} is larger than {max_bytes} "
                    "bytes"
                )
            stream.read()  # reach the end so the digest is checked
            return data
        finally:
            stream.close()

    def resolve(self, ref: ImageReference, platform: str | None = None) -> RegistryImage:
        """Fetch the image ``ref`` names (one image of an index, by the platform rule), with
        its config; layers are streamed later by `RegistryImage.open_blob`."""
        check_platform(platform)
        if ref.registry != self.registry:
            raise UsageError(f"{ref} is not on registry {self.registry}")
        top = self.get_manifest(ref.repository, ref.reference)
        if top is None:
            raise SourceError(f"image not found: {ref}")
        manifest = top
        if top.is_index:
            fetched: dict[str, Manifest] = {}

            def child(desc: Descriptor) -> Manifest:
                if desc.digest not in fetched:
                    found = self.get_manifest(ref.repository, desc.digest)
                    if found is None:
                        raise SourceError(
                            f"image not found: {ref.name}@{desc.digest} (listed by {ref})"
                        )
                    fetched[desc.digest] = found
                return fetched[desc.digest]

            def expand(desc: Descriptor) -> tuple[Descriptor, ...] | None:
                # Entries are read only when they may be indexes (as from an OCI layout).
                if desc.media_type and desc.media_type not in INDEX_TYPES:
                    return None
                nested = child(desc)
                return nested.descriptors("manifests") if nested.is_index else None

            images = leaves(top.descriptors("manifests"), expand, str(ref))
            manifest = child(choose_image(images, platform, str(ref)))
        if manifest.media_type not in MANIFEST_TYPES:
            raise SourceError(
                f"{ref}: unsupported manifest type {manifest.media_type or 'unknown'!r} "
                "(expected an OCI or Docker v2 schema 2 image)"
            )
        config_desc = manifest.config
        if config_desc is None or not isinstance(manifest.doc.get("layers"), list):
            raise SourceError(f"{ref}: manifest {manifest.digest} is not an image manifest")
        if config_desc.media_type and config_desc.media_type not in IMAGE_CONFIG_TYPES:
            raise SourceError(
                f"{ref} is an artifact of type {manifest.artifact_type!r}, not a container image"
            )
        if config_desc.size > CONFIG_LIMIT:
            raise SourceError(f"{ref}: image config is larger than {CONFIG_LIMIT} bytes")
        config_raw = self.read_blob(ref.repository, config_desc.digest, max_bytes=CONFIG_LIMIT)
        try:
            config = json.loads(config_raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise SourceError(f"{ref}: image config is not valid JSON ({e})") from e
        if not isinstance(config, dict):
            raise SourceError(f"{ref}: image config is not a JSON object")
        have = check_config_platform(config, platform, str(ref))
        return RegistryImage(
            client=self,
            reference=ref,
            digest=manifest.digest,
            top_digest=top.digest,
            manifest=manifest,
            config_descriptor=config_desc,
            config_raw=config_raw,
            config=config,
            layers=manifest.layers,
            platform=have or None,
        )


@dataclass(frozen=True)
class RegistryImage:
    """One resolved image: manifest (``digest``), config and layer descriptors.

    ``top_digest`` is the digest the reference resolved to (the index for a multi-platform
    image, where signatures usually point); ``digest`` is the chosen image manifest's.
    """

    client: RegistryClient = field(repr=False)
    reference: ImageReference
    digest: OciDigest
    top_digest: OciDigest
    manifest: Manifest = field(repr=False)
    config_descriptor: Descriptor
    config_raw: bytes = field(repr=False)
    config: dict[str, Any] = field(repr=False)
    layers: tuple[Descriptor, ...]
    platform: str | None

    def open_blob(self, digest: str, *, verify: bool = True) -> IO[bytes]:
        """Stream a blob of this image's repository, checking its digest (and its size when
        it is one of this image's layers or config) as the end is read."""
        size = next(
            (d.size for d in (*self.layers, self.config_descriptor) if d.digest == digest), None
        )
        return self.client.open_blob(self.reference.repository, digest, size=size, verify=verify)
