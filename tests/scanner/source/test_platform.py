"""One platform rule for every image source: the same index, in an OCI layout and served by a
registry, gives the same image, or the same error naming the available platforms."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from scanner.errors import ScannerError, SourceError, UsageError
from scanner.imageref import ImageReference
from scanner.source.image import OciLayoutSource
from scanner.source.registry.client import RegistryClient
from tests.fixtures.images import Built, Image, Layer, file, sha256

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _image(arch: str, variant: str | None = None) -> Built:
    layer = Layer([file("arch", f"{arch}{variant or ''}")])
    return Image([layer], architecture=arch, variant=variant).build()


AMD64, ARM64, PPC = _image("amd64"), _image("arm64", "v8"), _image("ppc64le")
ATTESTATION = _image("amd64")  # its index entry says unknown/unknown, as BuildKit writes


class Index:
    """An image index and every blob it reaches, servable from a layout and a registry."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.types: dict[str, str] = {}

    def image(self, built: Built, platform: bool = True) -> dict[str, object]:
        self.blobs.update(built.blobs())
        self.types[built.manifest_digest] = OCI_MANIFEST
        desc = built.descriptor()
        if not platform:
            desc.pop("platform")
        return desc

    def attestation(self, built: Built) -> dict[str, object]:
        desc = self.image(built)
        desc["platform"] = {"os": "unknown", "architecture": "unknown"}
        desc["annotations"] = {"vnd.docker.reference.type": "attestation-manifest"}
        return desc

    def index(self, entries: list[dict[str, object]]) -> dict[str, object]:
        raw = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
        data = raw.encode()
        self.blobs[sha256(data)] = data
        self.types[sha256(data)] = OCI_INDEX
        return {"mediaType": OCI_INDEX, "digest": sha256(data), "size": len(data)}

    def layout(self, path: Path, top: dict[str, object]) -> None:
        for digest, data in self.blobs.items():
            blob = path / "blobs" / digest.replace(":", "/")
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
        (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        named = {**top, "annotations": {"org.opencontainers.image.ref.name": "t"}}
        (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [named]}))

    def registry(self, top: dict[str, object]) -> httpx.MockTransport:
        def handler(request: httpx.Request) -> httpx.Response:
            path = request.url.path
            if path == "/v2/":
                return httpx.Response(200, json={})
            kind, _, reference = path.removeprefix("/v2/app/").partition("/")
            digest = str(top["digest"]) if reference == "t" else reference
            if digest not in self.blobs:
                return httpx.Response(404, json={"errors": []})
            headers = {"Content-Type": self.types.get(digest, "application/octet-stream")}
            return httpx.Response(200, content=self.blobs[digest], headers=headers)

        return httpx.MockTransport(handler)


def _both(
    tmp_path: Path, build: Callable[[Index], dict[str, object]], platform: str | None
) -> tuple[str | ScannerError, str | ScannerError]:
    """What the layout source and the registry source pick: a manifest digest or the error."""
    index = Index()
    top = build(index)
    index.layout(tmp_path / "layout", top)
    answers: list[str | ScannerError] = []
    try:
        plan = OciLayoutSource(tmp_path / "layout", "t", platform=platform).plan()
        answers.append(str(plan.manifest_digest))
    except ScannerError as e:
        answers.append(e)
    with RegistryClient("registry.example", transport=index.registry(top)) as client:
        try:
            image = client.resolve(
                ImageReference.parse("registry:registry.example/app:t"), platform
            )
            answers.append(str(image.digest))
        except ScannerError as e:
            answers.append(e)
    return answers[0], answers[1]


def _entries(
    *entries: Callable[[Index], dict[str, object]],
) -> Callable[[Index], dict[str, object]]:
    return lambda index: index.index([entry(index) for entry in entries])


def _img(built: Built, platform: bool = True) -> Callable[[Index], dict[str, object]]:
    return lambda index: index.image(built, platform)


def _att(built: Built) -> Callable[[Index], dict[str, object]]:
    return lambda index: index.attestation(built)


def _nested(*entries: Callable[[Index], dict[str, object]]) -> Callable[[Index], dict[str, object]]:
    return _entries(*entries)


@pytest.mark.parametrize(
    ("build", "platform", "expected"),
    [
        # the default platform is preferred over the first entry
        (_entries(_img(ARM64), _img(AMD64)), None, AMD64.manifest_digest),
        (_entries(_img(ARM64), _img(AMD64)), "linux/arm64", ARM64.manifest_digest),
        (_entries(_img(ARM64), _img(AMD64)), "linux/arm64/v8", ARM64.manifest_digest),
        # one image is the answer when nothing is asked, whatever its platform
        (_entries(_img(ARM64)), None, ARM64.manifest_digest),
        # attestation entries are never images
        (_entries(_att(ATTESTATION), _img(ARM64)), None, ARM64.manifest_digest),
        # nested indexes are flattened, in both sources
        (_entries(_nested(_img(AMD64), _img(ARM64))), "linux/arm64", ARM64.manifest_digest),
        (_entries(_nested(_img(ARM64)), _img(PPC)), None, UsageError),
        # several images, none of the default platform, nothing asked: no silent first pick
        (_entries(_img(ARM64), _img(PPC)), None, UsageError),
        (_entries(_img(ARM64), _img(AMD64)), "linux/s390x", UsageError),
        (_entries(_att(ATTESTATION)), None, SourceError),
        # a lone entry without a platform is judged by its config
        (_entries(_img(AMD64, platform=False)), "linux/amd64", AMD64.manifest_digest),
        (_entries(_img(AMD64, platform=False)), "linux/arm64", UsageError),
    ],
)
def test_layout_and_registry_pick_the_same_image(
    tmp_path: Path,
    build: Callable[[Index], dict[str, object]],
    platform: str | None,
    expected: str | type[ScannerError],
) -> None:
    layout, registry = _both(tmp_path, build, platform)
    if isinstance(expected, str):
        assert layout == registry == expected
        return
    assert isinstance(layout, expected) and isinstance(registry, expected)
    # The same reason after each source's own label (the layout path, the reference).
    assert str(layout).split(": ", 1)[1] == str(registry).split(": ", 1)[1]


def test_errors_name_the_available_platforms(tmp_path: Path) -> None:
    layout, registry = _both(tmp_path, _entries(_img(ARM64), _img(PPC)), None)
    for error in (layout, registry):
        assert str(error).endswith(
            "no image for platform linux/amd64 (available: linux/arm64/v8, linux/ppc64le); "
            "pick one with --platform"
        )
    layout, registry = _both(tmp_path, _entries(_img(ARM64), _img(AMD64)), "linux/s390x")
    for error in (layout, registry):
        assert str(error).endswith(
            "no image for platform linux/s390x (available: linux/amd64, linux/arm64/v8)"
        )
    layout, registry = _both(tmp_path, _entries(_img(AMD64, platform=False)), "linux/arm64")
    for error in (layout, registry):
        assert str(error).endswith("the image is for linux/amd64, not linux/arm64")
