"""Discovery of the manifests that refer to an image (signatures, attestations, SBOMs): the
OCI 1.1 referrers API, its ``sha256-<hex>`` tag fallback, and cosign's legacy ``.sig`` /
``.att`` tags. The tag names are the one rule of `scanner.verify.cosign_tags` (a leaf module);
verification is the verify stage's job.
"""

from __future__ import annotations

import json
from contextlib import closing
from enum import StrEnum

import httpx
from msgspec import Struct

from scanner.errors import SourceError
from scanner.imageref import split_digest
from scanner.model import OciDigest
from scanner.source.oci import Descriptor
from scanner.source.registry.client import RegistryClient
from scanner.source.registry.manifest import MANIFEST_LIMIT, OCI_INDEX, Manifest
from scanner.source.registry.transport import read_limited, scope
from scanner.verify.cosign_tags import attestation_tag, referrers_tag, signature_tag

# Answers to GET /v2/<name>/referrers/<digest> from registries without the API: OCI 1.1 says
# 404; some answer 400, 405 or 501 for routes they do not know.
_NO_REFERRERS_API = (400, 404, 405, 406, 501)


class FoundBy(StrEnum):
    """How a referrer was discovered."""

    REFERRERS_API = "referrers-api"  # GET /v2/<name>/referrers/<digest> (OCI 1.1)
    REFERRERS_TAG = "referrers-tag"  # the index tagged sha256-<hex> (OCI 1.1 fallback)
    COSIGN_SIGNATURE = "cosign-signature-tag"  # sha256-<hex>.sig
    COSIGN_ATTESTATION = "cosign-attestation-tag"  # sha256-<hex>.att


class Referrer(Struct, frozen=True):
    """A manifest that refers to an image (signature, attestation, SBOM): fetch its layer
    blobs with `RegistryClient.read_blob`."""

    manifest: Manifest
    found_by: FoundBy
    tag: str | None = None  # the tag it was found under (tag-based discovery)

    @property
    def digest(self) -> OciDigest:
        return self.manifest.digest

    @property
    def artifact_type(self) -> str | None:
        return self.manifest.artifact_type

    @property
    def layers(self) -> tuple[Descriptor, ...]:
        return self.manifest.layers


def list_referrers(
    client: RegistryClient, repository: str, digest: str, *, artifact_type: str | None = None
) -> list[Referrer]:
    """Manifests that refer to ``digest``: the OCI 1.1 referrers API, or the ``sha256-<hex>``
    referrers tag when the registry has no such API, plus cosign's legacy ``sha256-<hex>.sig``
    / ``.att`` tags. Filtered by ``artifact_type`` when given (for legacy tags: the config
    media type or the layers' media type)."""
    algorithm, hexdigest = split_digest(digest)
    label = f"referrers of {client.registry}/{repository}@{digest}"
    path = f"/v2/{repository}/referrers/{digest}"
    if artifact_type:
        path += "?" + str(httpx.QueryParams({"artifactType": artifact_type}))
    response = client.connection.send(
        "GET", path, label=label, scope=scope(repository), headers={"Accept": OCI_INDEX}
    )
    found: list[Referrer] = []
    if response.status_code == 200:
        with closing(response):
            raw = read_limited(response, MANIFEST_LIMIT, label)
        descs = _index_descriptors(raw, label)
        found.extend(_fetch(client, repository, digest, descs, FoundBy.REFERRERS_API))
    elif response.status_code in _NO_REFERRERS_API:
        response.close()
        tag = referrers_tag(algorithm, hexdigest)
        index = client.get_manifest(repository, tag, accept=OCI_INDEX)
        if index is not None:
            descs = index.descriptors("manifests")
            found.extend(_fetch(client, repository, digest, descs, FoundBy.REFERRERS_TAG, tag))
    else:
        raise client.connection.fail(response, label, label)
    for tag, kind in (
        (signature_tag(algorithm, hexdigest), FoundBy.COSIGN_SIGNATURE),
        (attestation_tag(algorithm, hexdigest), FoundBy.COSIGN_ATTESTATION),
    ):
        legacy = client.get_manifest(repository, tag)
        if legacy is not None and not legacy.is_index:
            found.append(Referrer(legacy, kind, tag))
    if artifact_type:
        found = [r for r in found if _has_type(r.manifest, artifact_type)]
    return found


def _fetch(
    client: RegistryClient,
    repository: str,
    digest: str,
    descs: tuple[Descriptor, ...],
    kind: FoundBy,
    tag: str | None = None,
) -> list[Referrer]:
    out = []
    for desc in descs:
        manifest = client.get_manifest(repository, desc.digest)
        # A listed manifest that names another subject does not refer to this image.
        if manifest is None or manifest.subject not in (None, digest):
            continue
        out.append(Referrer(manifest, kind, tag))
    return out


def _index_descriptors(raw: bytes, label: str) -> tuple[Descriptor, ...]:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise SourceError(f"{label}: not valid JSON ({e})") from e
    items = doc.get("manifests") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise SourceError(f"{label}: the answer is not an image index")
    return tuple(Descriptor.parse(obj, label) for obj in items)


def _has_type(manifest: Manifest, artifact_type: str) -> bool:
    if manifest.artifact_type == artifact_type:
        return True
    return any(layer.media_type == artifact_type for layer in manifest.layers)
