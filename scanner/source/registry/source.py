"""The ``registry:`` / ``docker://`` source: resolve the image, stream its layers through the
shared single-read pipeline (`scanner.source.image.image_view`), never storing them on disk,
and fetch the signature material the verify stage checks.
"""

from __future__ import annotations

import functools

import httpx

from scanner.imageref import ImageReference
from scanner.model import Skipped, Stage
from scanner.source.image import ImagePlan, image_view
from scanner.source.interface import RootView, Selector, SignatureLayer
from scanner.source.layerstream import LayerSpec
from scanner.source.limits import Limits
from scanner.source.platform import check_platform
from scanner.source.registry.auth import RegistryOptions
from scanner.source.registry.client import RegistryClient, RegistryImage
from scanner.source.registry.referrers import list_referrers
from scanner.source.squash import YieldCache


class RegistrySource:
    """``registry:HOST[:PORT]/REPO[:TAG|@DIGEST]`` or ``docker://...``: an image in an OCI
    distribution registry, streamed layer by layer (never stored on disk)."""

    def __init__(
        self,
        target: str | ImageReference,
        *,
        platform: str | None = None,
        cache: YieldCache | None = None,
        limits: Limits | None = None,
        options: RegistryOptions | None = None,
        reference: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        check_platform(platform)
        self.ref = target if isinstance(target, ImageReference) else ImageReference.parse(target)
        self.platform = platform
        self.cache = cache
        self.limits = limits
        self.options = options or RegistryOptions()
        self.reference = reference if reference is not None else str(target)
        self._transport = transport

    def client(self) -> RegistryClient:
        """A new client for the image's registry (the caller closes it)."""
        return RegistryClient.for_reference(self.ref, self.options, self._transport)

    def open_view(self, selector: Selector) -> RootView:
        """Resolve the image and squash its layers (each blob fetched at most once, none when
        the layer cache already holds its yield)."""
        with self.client() as client:
            image = client.resolve(self.ref, self.platform)
            self.digests = tuple(dict.fromkeys((image.top_digest, image.digest)))
            return image_view(
                image_plan(image),
                selector,
                reference=self.reference,
                cache=self.cache,
                limits=self.limits,
            )

    #: Digests signatures may name, set by `open_view`: the tag's target (an index for a
    #: multi-platform image, which is what `cosign sign IMAGE:TAG` signs) and the manifest.
    digests: tuple[str, ...] = ()

    def signature_material(self) -> list[SignatureLayer]:
        """Every signature/attestation layer the registry holds for this image's digests.

        Referrers API first, cosign's ``sha256-<hex>.sig``/``.att`` tags as fallback; each
        blob is fetched whole (they are small). Verification, the blob digest included, is the
        verify stage's job: a tampered signature blob is one rejected layer with its reason,
        not the end of the scan.
        """
        found: list[SignatureLayer] = []
        with self.client() as client:
            for digest in self.digests:
                for ref in list_referrers(client, self.ref.repository, digest):
                    for desc in ref.layers:
                        data = client.read_blob(self.ref.repository, desc.digest, verify=False)
                        found.append(
                            SignatureLayer(
                                subject=digest,
                                media_type=desc.media_type,
                                data=data,
                                # cosign v3 puts dev.sigstore.bundle.* on the referrer manifest
                                # (cosign specs/BUNDLE_SPEC.md); the layer's own annotations win.
                                annotations={**ref.manifest.annotations, **desc.annotations},
                                digest=desc.digest,
                            )
                        )
        return found


def image_plan(image: RegistryImage) -> ImagePlan:
    """The `ImagePlan` the shared layer pipeline squashes; foreign layers (not served by the
    registry) are skipped items."""
    layers: list[LayerSpec] = []
    skipped: list[Skipped] = []
    for desc in image.layers:
        if desc.urls or "nondistributable" in desc.media_type or "foreign" in desc.media_type:
            skipped.append(
                Skipped(str(desc.digest), "foreign layer not served by the registry", Stage.SOURCE)
            )
            continue
        # read_layer checks the blob digest itself, so the stream does not hash it twice.
        opener = functools.partial(image.open_blob, desc.digest, verify=False)
        layers.append(LayerSpec(desc.digest, desc.size, opener, "blob"))
    ref = image.reference
    name = ref.name
    if ref.tag is not None:
        name += f":{ref.tag}"
    elif ref.digest is not None:
        name += f"@{ref.digest}"
    return ImagePlan(
        name=name,
        manifest_digest=image.digest,
        config_digest=image.config_descriptor.digest,
        config=image.config,
        layers=tuple(layers),
        layer_digests=tuple(d.digest for d in image.layers),
        skipped=tuple(skipped),
    )
