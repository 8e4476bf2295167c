"""CycloneDX output: schema validity (1.6 and 1.7), golden files, and the content contract.

Golden files (tests/scanner/bom/golden/*.json) are the encoding of hand-built scan results
with the volatile fields normalised (serial number, timestamp, tool version, generated
bom-refs). After an intended change to the encoder, regenerate them and review the diff:

    GPUPROV_REGEN_GOLDEN=1 .venv/bin/pytest tests/scanner/bom -q

The content checks run on real scans of the acceptance world (tests/scanner/scenarios.py): a
host tree and the same root as an image in every format.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace
from packageurl import PackageURL

from scanner import vocabulary as V
from scanner.bom.cyclonedx import to_json, validate_json
from scanner.errors import OutputError
from scanner.model import (
    AssetInfo,
    AssetKind,
    Confidence,
    Digests,
    Evidence,
    FileRef,
    Finding,
    GpuLibrary,
    Identification,
    Integrity,
    OciDigest,
    OwnedFile,
    Package,
    ScanResult,
    Sha256,
    Skipped,
)
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import images as im
from tests.scanner import scenarios as sc

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("GPUPROV_REGEN_GOLDEN") == "1"
SPECS = ("1.6", "1.7")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


# --- hand-built results for the golden files -------------------------------------------------

LAYERS = tuple(OciDigest("sha256:" + c * 64) for c in "abc")


def _ev(field: str, value: str, method: str, source: str, conf: Confidence) -> Evidence:
    return Evidence(field, value, method, source, conf)


CUDNN_DEB = Package(
    manager="dpkg",
    name="libcudnn9-cuda-12",
    version="9.1.0.70-1",
    purl="pkg:deb/ubuntu/libcudnn9-cuda-12@9.1.0.70-1?arch=amd64&distro=ubuntu-22.04",
    arch="amd64",
    source="/var/lib/dpkg/status",
    files=(
        OwnedFile("/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.1.0", "md5", "1" * 32),
        OwnedFile("/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.1.0", "md5", "2" * 32),
    ),
)
CUBLAS_WHEEL = Package(
    manager="pip",
    name="nvidia-cublas-cu12",
    version="12.4.5.8",
    purl="pkg:pypi/nvidia-cublas-cu12@12.4.5.8",
    source="/usr/local/lib/python3.10/dist-packages/nvidia_cublas_cu12-12.4.5.8.dist-info/RECORD",
)


def _cudnn(comp: str, sha: str, md5: str, integrity: Integrity, reason: str) -> GpuLibrary:
    path = f"/usr/lib/x86_64-linux-gnu/lib{comp}.so.9.1.0"
    return GpuLibrary(
        ref=FileRef(path, LAYERS[1]),
        size=1234,
        aliases=(
            f"/usr/lib/x86_64-linux-gnu/lib{comp}.so",
            f"/usr/lib/x86_64-linux-gnu/lib{comp}.so.9",
        ),
        ident=Identification(
            family="cudnn",
            component=comp,
            version="9.1.0.70",
            cuda_major=12,
            arch="x86_64",
            soname=f"lib{comp}.so.9",
            evidence=(
                _ev("name", "cudnn", "filename", f"lib{comp}.so.9.1.0", Confidence.MEDIUM),
                _ev(
                    "version", "9.1.0", "binary-analysis", f"symbol {comp}_version", Confidence.HIGH
                ),
                _ev(
                    "version",
                    "9.1.0.70",
                    "manifest-analysis",
                    "dpkg libcudnn9-cuda-12",
                    Confidence.HIGH,
                ),
                _ev(
                    "version",
                    "9.1.0.70-1",
                    "other",
                    "image config NV_CUDNN_VERSION",
                    Confidence.LOW,
                ),
                _ev(
                    "cuda-major",
                    "12",
                    "binary-analysis",
                    "cudnnGetCudartVersion 12040",
                    Confidence.HIGH,
                ),
            ),
        ),
        digests=Digests(1234, Sha256(sha * 64), md5 * 32),
        owner=CUDNN_DEB,
        integrity=integrity,
        integrity_reason=reason,
    )


def golden_image_result() -> ScanResult:
    """An image with a verified, a modified, a pip-owned, an unowned and a mixed library."""
    unowned = GpuLibrary(
        ref=FileRef("/opt/app/lib/libcudart.so.12", LAYERS[2]),
        size=700,
        aliases=(),
        ident=Identification(
            family="cudart",
            component="cudart",
            version="12.4.127",
            cuda_major=12,
            arch="x86_64",
            soname="libcudart.so.12",
            evidence=(
                _ev("name", "cudart", "binary-analysis", "soname libcudart.so.12", Confidence.HIGH),
                _ev(
                    "version", "12.4.127", "hash-comparison", "same SHA-256 as /x", Confidence.HIGH
                ),
            ),
        ),
        digests=Digests(700, Sha256("d" * 64), None),
        owner=None,
        integrity=Integrity.UNOWNED,
        integrity_reason="no package database in the root claims this file",
        notes=("mixed-cudnn",),
    )
    cublas = GpuLibrary(
        ref=FileRef(
            "/usr/local/lib/python3.10/dist-packages/nvidia/cublas/lib/libcublas.so.12", LAYERS[2]
        ),
        size=5000,
        aliases=(),
        ident=Identification(
            family="cublas",
            component="cublas",
            version="12.4.5.8",
            cuda_major=12,
            arch="x86_64",
            soname="libcublas.so.12",
            evidence=(_ev("version", "12.4.5.8", "manifest-analysis", "pip", Confidence.HIGH),),
        ),
        digests=Digests(5000, Sha256("e" * 64), None),
        owner=CUBLAS_WHEEL,
        integrity=Integrity.VERIFIED,
        integrity_reason="SHA-256 matches the pip record",
    )
    libraries = (
        unowned,
        _cudnn("cudnn_graph", "a", "1", Integrity.VERIFIED, "MD5 matches the dpkg record"),
        _cudnn("cudnn_ops", "b", "3", Integrity.MODIFIED, "MD5 differs from the dpkg record"),
        cublas,
    )
    return ScanResult(
        asset=AssetInfo(
            kind=AssetKind.IMAGE,
            name="registry.example.com/ml/train:12.4-cudnn9",
            reference="oci-archive:/images/train.tar:12.4-cudnn9",
            digest=OciDigest("sha256:" + "f" * 64),
            config_digest=OciDigest("sha256:" + "9" * 64),
            platform="linux/amd64",
            env=(("CUDA_VERSION", "12.4.1"), ("NV_CUDNN_VERSION", "9.1.0.70-1")),
            labels=(("com.nvidia.cudnn.version", "9.1.0.70-1"), ("team", "ml-platform")),
            layers=LAYERS,
        ),
        libraries=libraries,
        packages=(CUBLAS_WHEEL, CUDNN_DEB),
        findings=(
            Finding("mixed", "mixed cuDNN 9 sub-libraries in /opt/app/lib", ("/opt/app/lib/x",)),
            Finding("modified", "1 GPU library modified", (libraries[2].ref.path,)),
            Finding("unowned", "1 GPU library unowned", (unowned.ref.path,)),
        ),
        skipped=(
            Skipped("/opt/app/lib/libcudnn_cnn.so", "symlink loop: ...", "source"),
            Skipped("/var/lib/rpm/rpmdb.sqlite", "unreadable rpm sqlite database", "catalog"),
        ),
        started_at="2026-01-02T03:04:05Z",
        tool_version="0.0.0-golden",
    )


def golden_host_result() -> ScanResult:
    lib = GpuLibrary(
        ref=FileRef("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.309.01"),
        size=100,
        aliases=("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",),
        ident=Identification(
            family="nvidia-ml",
            component="nvidia-ml",
            version="535.309.01",
            cuda_major=None,
            arch="x86_64",
            soname="libnvidia-ml.so.1",
            evidence=(
                _ev("version", "535.309.01", "binary-analysis", "rodata", Confidence.MEDIUM),
            ),
        ),
        digests=Digests(100, Sha256("c" * 64), None),
        owner=None,
        integrity=Integrity.UNOWNED,
        integrity_reason="no package database in the root claims this file",
    )
    return ScanResult(
        asset=AssetInfo(
            kind=AssetKind.HOST,
            name="gpu-node-7",
            reference="/",
            machine_id="4c4c4544004e3510804bb7c04f4d3732",
        ),
        libraries=(lib,),
        packages=(),
        findings=(Finding("unowned", "1 GPU library unowned", (lib.ref.path,)),),
        skipped=(),
        started_at="2026-01-02T03:04:05Z",
        tool_version="0.0.0-golden",
    )


def normalise(document: str) -> dict[str, Any]:
    """The BOM with its volatile fields replaced by fixed values."""
    doc: dict[str, Any] = json.loads(document)
    assert doc.pop("serialNumber").startswith("urn:uuid:")
    meta = doc["metadata"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.*", meta.pop("timestamp"))
    for tool in meta["tools"]["components"]:
        tool["version"] = "<tool-version>"
    # bom-refs the library generates for unnamed references are random UUIDs
    text = _UUID.sub("<uuid>", json.dumps(doc, sort_keys=True))
    normalised: dict[str, Any] = json.loads(text)
    return normalised


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("kind", ["image", "host"])
def test_golden(kind: str, spec: str) -> None:
    result = golden_image_result() if kind == "image" else golden_host_result()
    document = to_json(result, spec)
    assert validate_json(document, spec) is None
    got = normalise(document)
    path = GOLDEN / f"{kind}-{spec}.json"
    if REGEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert path.exists(), f"missing {path}: run GPUPROV_REGEN_GOLDEN=1 pytest tests/scanner/bom"
    assert got == json.loads(path.read_text()), f"{path} differs; see the module docstring"


def test_normalise_keeps_what_matters() -> None:
    """Two encodings differ only in volatile fields; a real change is not normalised away."""
    original = golden_image_result()
    a = normalise(to_json(original))
    assert a == normalise(to_json(golden_image_result()))
    libs = list(original.libraries)
    libs[1] = replace(libs[1], integrity=Integrity.MODIFIED)
    assert normalise(to_json(replace(original, libraries=tuple(libs)))) != a


def test_validation_catches_invalid_documents() -> None:
    doc = json.loads(to_json(golden_host_result()))
    doc["components"][0]["hashes"][0]["alg"] = "SHA-999"
    assert validate_json(json.dumps(doc), "1.6") is not None
    doc = json.loads(to_json(golden_host_result()))
    doc["components"][0]["type"] = "gpu-library"
    assert validate_json(json.dumps(doc), "1.7") is not None
    with pytest.raises(OutputError, match="1.5"):
        to_json(golden_host_result(), "1.5")


# --- content of real scans -------------------------------------------------------------------


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "acceptance-world")


@pytest.fixture(scope="session")
def scans(world: sc.World) -> dict[str, tuple[ScanResult, dict[str, sc.Expected]]]:
    out = {"host": (run_scan(str(world.root), ScanOptions(use_cache=False)), world.expected)}
    for fmt in im.FORMATS:
        target, built = world.image_target(fmt)
        result = run_scan(target, ScanOptions(use_cache=False))
        out[fmt] = (result, world.expected_for_image(built))
    return out


def props(component: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in component.get("properties", []):
        out.setdefault(p["name"], []).append(p["value"])
    return out


def one(component: dict[str, Any], name: str) -> str | None:
    values = props(component).get(name)
    if values is None:
        return None
    assert len(values) == 1, (name, values)
    return values[0]


_VOCABULARY = {v for k, v in vars(V).items() if k.isupper() and isinstance(v, str)}
_SCANS = ["host", *im.FORMATS]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("name", _SCANS)
def test_real_scans_validate(
    scans: dict[str, tuple[ScanResult, dict[str, sc.Expected]]], name: str, spec: str
) -> None:
    document = to_json(scans[name][0], spec)
    assert validate_json(document, spec) is None
    doc = json.loads(document)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == spec
    used = {
        p["name"]
        for c in [doc["metadata"]["component"], *doc["components"]]
        for p in c.get("properties", [])
    } | {p["name"] for p in doc["metadata"].get("properties", [])}
    undocumented = {
        n for n in used if n not in _VOCABULARY and not n.startswith(V.ASSET_LABEL_PREFIX)
    }
    assert not undocumented, "gpuprov: properties missing from scanner/vocabulary.py"


@pytest.mark.parametrize("name", _SCANS)
def test_asset_component(
    world: sc.World, scans: dict[str, tuple[ScanResult, dict[str, sc.Expected]]], name: str
) -> None:
    result, _ = scans[name]
    asset = json.loads(to_json(result))["metadata"]["component"]
    if name == "host":
        assert asset["type"] == "operating-system"
        assert asset["name"] == sc.HOSTNAME
        assert one(asset, V.ASSET_KIND) == "host"
        assert one(asset, V.HOST_HOSTNAME) == sc.HOSTNAME
        assert one(asset, V.HOST_MACHINE_ID) == sc.MACHINE_ID
        assert "purl" not in asset and one(asset, V.IMAGE_DIGEST) is None
        return
    target, built = world.image_target(name)
    assert asset["type"] == "container"
    assert one(asset, V.ASSET_KIND) == "image"
    assert one(asset, V.IMAGE_REFERENCE) == target
    assert one(asset, V.IMAGE_PLATFORM) == "linux/amd64"
    assert one(asset, f"{V.ASSET_LABEL_PREFIX}com.nvidia.cudnn.version") == "9.1.0.70-1"
    if name == "docker-archive":
        # the legacy `docker save` form holds no manifest: there is no manifest digest to give
        assert one(asset, V.IMAGE_DIGEST) is None and "purl" not in asset
        return
    assert one(asset, V.IMAGE_DIGEST) == built.manifest_digest
    assert asset["version"] == built.manifest_digest
    purl = PackageURL.from_string(asset["purl"])
    assert purl.type == "oci" and purl.version == built.manifest_digest
    qualifiers = purl.qualifiers
    assert isinstance(qualifiers, dict)
    assert qualifiers["tag"] == "12.4-cudnn9" and qualifiers["arch"] == "amd64"


@pytest.mark.parametrize("name", _SCANS)
def test_file_components(
    world: sc.World, scans: dict[str, tuple[ScanResult, dict[str, sc.Expected]]], name: str
) -> None:
    result, expected = scans[name]
    doc = json.loads(to_json(result))
    files = {c["name"]: c for c in doc["components"] if c["type"] == "file"}
    assert sorted(files) == sorted(expected)
    for path, exp in expected.items():
        c = files[path]
        sha = [h["content"] for h in c["hashes"] if h["alg"] == "SHA-256"]
        assert sha == [exp.sha256], path
        assert c["version"] == exp.version
        assert one(c, V.FILE_PATH) == path
        assert one(c, V.FILE_ALIASES) == (",".join(exp.aliases) or None)
        assert one(c, V.LIBRARY_FAMILY) == exp.family
        assert one(c, V.LIBRARY_COMPONENT) == exp.component
        assert one(c, V.LIBRARY_VERSION) == exp.version
        cuda = one(c, V.LIBRARY_CUDA_MAJOR)
        assert cuda == (str(exp.cuda_major) if exp.cuda_major else None), path
        assert one(c, V.LIBRARY_ARCH) == "x86_64"
        soname = one(c, V.LIBRARY_SONAME)
        assert soname is not None and soname.startswith(f"lib{exp.component}.so."), path
        assert one(c, V.OWNER_PURL) == exp.owner
        assert one(c, V.INTEGRITY) == exp.integrity
        assert one(c, V.INTEGRITY_REASON)
        assert one(c, V.LAYER) == exp.layer  # images only; absent on a host
        assert props(c).get(V.NOTE) == (["mixed-cudnn"] if path in world.mixed_paths else None)
        # evidence: where each alias occurs, and how the version was concluded
        occurrences = [o["location"] for o in c["evidence"]["occurrences"]]
        assert sorted(occurrences) == sorted([path, *exp.aliases])
        identity = {i["field"]: i for i in c["evidence"]["identity"]}
        assert identity["version"]["concludedValue"] == exp.version
        assert identity["version"]["methods"]
        assert identity["name"]["concludedValue"] == exp.family


@pytest.mark.parametrize("name", ["host", "oci"])
def test_image_evidence_includes_the_config(
    scans: dict[str, tuple[ScanResult, dict[str, sc.Expected]]], name: str
) -> None:
    doc = json.loads(to_json(scans[name][0]))
    graph = next(c for c in doc["components"] if c["name"].endswith("libcudnn_graph.so.9.1.0"))
    methods = [m["value"] for i in graph["evidence"]["identity"] for m in i["methods"]]
    from_config = [m for m in methods if "NV_CUDNN_VERSION" in m or "com.nvidia.cudnn" in m]
    assert bool(from_config) == (name == "oci")
    assert any("cudnn_version_9_1_0_70" in m for m in methods)


@pytest.mark.parametrize("name", _SCANS)
def test_packages_and_dependencies(
    scans: dict[str, tuple[ScanResult, dict[str, sc.Expected]]], name: str
) -> None:
    result, expected = scans[name]
    doc = json.loads(to_json(result))
    packages = {c["bom-ref"]: c for c in doc["components"] if c["type"] == "library"}
    owners = {e.owner for e in expected.values() if e.owner}
    assert set(packages) == owners
    for ref, c in packages.items():
        purl = PackageURL.from_string(c["purl"])
        assert c["purl"] == ref
        assert purl.name == c["name"] and purl.version == c["version"]
        assert one(c, V.PACKAGE_MANAGER) in ("dpkg", "rpm", "pip", "conda")
        assert one(c, V.PACKAGE_DB)
    files = {c["name"]: c["bom-ref"] for c in doc["components"] if c["type"] == "file"}
    deps = {d["ref"]: sorted(d.get("dependsOn", [])) for d in doc["dependencies"]}
    for owner in owners:
        owned = sorted(files[p] for p, e in expected.items() if e.owner == owner)
        assert deps[owner] == owned, owner
    unowned = sorted(files[p] for p, e in expected.items() if e.owner is None)
    # the products the files make up (the driver of a host's libcuda) hang off the asset too
    products = [c["bom-ref"] for c in doc["components"] if c["bom-ref"].startswith("product:")]
    assert all(ref in deps for ref in products)
    assert deps["asset"] == sorted([*owners, *unowned, *products])
    meta = props(doc["metadata"])
    assert sorted(v.split(":")[0] for v in meta[V.SCAN_FINDING]) == ["mixed", "modified", "unowned"]
    assert sorted(meta[V.SCAN_SKIPPED]) == sorted(
        [
            f"source: {sc.APP}/libcudnn_cnn.so: {result.skipped[0].reason}",
            f"source: {sc.APP}/libcudnn_cnn.so.9: {result.skipped[1].reason}",
        ]
    )
