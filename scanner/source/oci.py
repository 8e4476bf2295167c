"""OCI digests and content descriptors, shared by the image-layout, archive and registry
sources."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field

from scanner.errors import SourceError
from scanner.imageref import split_digest
from scanner.model import OciDigest


class Descriptor(Struct, frozen=True):
    """An OCI content descriptor, validated at construction."""

    media_type: str
    digest: OciDigest
    size: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    platform: str | None = None  # "os/arch[/variant]"
    artifact_type: str | None = None
    urls: tuple[str, ...] = ()

    @classmethod
    def parse(cls, obj: Any, what: str) -> Descriptor:
        """A descriptor from its JSON object; SourceError naming ``what`` when malformed."""
        if not isinstance(obj, dict):
            raise SourceError(f"{what}: descriptor is not an object")
        digest, size = obj.get("digest"), obj.get("size")
        if not isinstance(digest, str) or not isinstance(size, int) or size < 0:
            raise SourceError(f"{what}: descriptor without a valid digest and size")
        try:
            split_digest(digest)
        except SourceError as e:
            raise SourceError(f"{what}: {e}") from e
        annotations = obj.get("annotations")
        platform = None
        p = obj.get("platform")
        if isinstance(p, dict) and p.get("os") and p.get("architecture"):
            platform = "/".join(str(x) for x in (p["os"], p["architecture"], p.get("variant")) if x)
        urls = obj.get("urls")
        artifact_type = obj.get("artifactType")
        return cls(
            media_type=str(obj.get("mediaType") or ""),
            digest=OciDigest(digest),
            size=size,
            annotations=(
                {str(k): str(v) for k, v in annotations.items()}
                if isinstance(annotations, dict)
                else {}
            ),
            platform=platform,
            artifact_type=artifact_type if isinstance(artifact_type, str) else None,
            urls=tuple(str(u) for u in urls) if isinstance(urls, list) else (),
        )

    def to_json(self) -> dict[str, Any]:
        """The descriptor as a JSON object (for manifests being pushed)."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest}
        out["size"] = self.size
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out
