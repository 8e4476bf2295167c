"""Builders of realistic CycloneDX JSON reports for the service tests and the ingest benchmark.

`gpuprov_bom` follows the scanner's ``gpuprov:`` vocabulary (scanner/vocabulary.py); the
`trivy_bom`, `syft_bom` and `cdxgen_bom` builders follow the shapes those tools emit for images
with NVIDIA libraries (Trivy: ``aquasecurity:trivy:*`` properties and a ``pkg:oci`` purl; Syft:
the manifest digest as the container's version and ``file`` components; cdxgen: specVersion 1.7
and ``oci:image:*`` metadata properties).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from scanner import vocabulary as v

SITE = "/usr/local/lib/python3.11/site-packages/nvidia"


def digest_of(*parts: object) -> str:
    """A deterministic SHA-256 hex digest standing in for a file's content."""
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


@dataclass(frozen=True)
class Lib:
    """One GPU library file as the scanner reports it."""

    path: str
    family: str
    component: str
    version: str
    cuda_major: int | None = 12
    sha256: str = ""
    integrity: str = "verified"
    provenance: str = "unknown"
    owner_purl: str | None = None
    layer: str | None = None
    aliases: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def digest(self) -> str:
        return self.sha256 or digest_of(self.path, self.version)


@dataclass
class Owner:
    purl: str
    name: str
    version: str
    libs: list[Lib] = field(default_factory=list)


def cudnn_wheel(version: str = "9.1.0.70", cuda: int = 12, site: str = SITE) -> Owner:
    """The nvidia-cudnn-cuXX wheel: eight cuDNN 9 sub-libraries under nvidia/cudnn/lib."""
    purl = f"pkg:pypi/nvidia-cudnn-cu{cuda}@{version}"
    subs = [
        "cudnn",
        "cudnn_graph",
        "cudnn_engines_precompiled",
        "cudnn_engines_runtime_compiled",
        "cudnn_heuristic",
        "cudnn_ops",
        "cudnn_cnn",
        "cudnn_adv",
    ]
    major = version.split(".")[0]
    libs = [
        Lib(
            path=f"{site}/cudnn/lib/lib{sub}.so.{major}",
            family="cudnn",
            component=sub,
            version=version,
            cuda_major=cuda,
            owner_purl=purl,
        )
        for sub in subs
    ]
    return Owner(purl, f"nvidia-cudnn-cu{cuda}", version, libs)


def cuda_wheels(version: str = "12.4.127", cuda: int = 12, site: str = SITE) -> list[Owner]:
    """Runtime, cuBLAS and NCCL wheels with one or two files each."""
    owners = []
    for pkg, family, files in (
        ("nvidia-cuda-runtime", "cudart", ["cuda_runtime/lib/libcudart.so.12"]),
        (
            "nvidia-cublas",
            "cublas",
            ["cublas/lib/libcublas.so.12", "cublas/lib/libcublasLt.so.12"],
        ),
        ("nvidia-nccl", "nccl", ["nccl/lib/libnccl.so.2"]),
    ):
        ver = "2.21.5" if family == "nccl" else version
        purl = f"pkg:pypi/{pkg}-cu{cuda}@{ver}"
        libs = []
        for rel in files:
            fam = "cublasLt" if "cublasLt" in rel else family
            libs.append(
                Lib(
                    path=f"{site}/{rel}",
                    family=fam,
                    component=fam,
                    version=ver,
                    cuda_major=cuda,
                    owner_purl=purl,
                )
            )
        owners.append(Owner(purl, f"{pkg}-cu{cuda}", ver, libs))
    return owners


def _props(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": n, "value": val} for n, val in pairs]


def file_component(lib: Lib) -> dict[str, Any]:
    """A scanner-style file component for one GPU library."""
    pairs = [
        (v.FILE_PATH, lib.path),
        (v.LIBRARY_FAMILY, lib.family),
        (v.LIBRARY_COMPONENT, lib.component),
        (v.LIBRARY_VERSION, lib.version),
        (v.LIBRARY_ARCH, "x86_64"),
        (v.INTEGRITY, lib.integrity),
        (v.PROVENANCE, lib.provenance),
    ]
    if lib.cuda_major is not None:
        pairs.append((v.LIBRARY_CUDA_MAJOR, str(lib.cuda_major)))
    if lib.owner_purl:
        pairs.append((v.OWNER_PURL, lib.owner_purl))
    if lib.layer:
        pairs.append((v.LAYER, lib.layer))
    if lib.aliases:
        pairs.append((v.FILE_ALIASES, ",".join(lib.aliases)))
    pairs += [(v.NOTE, n) for n in lib.notes]
    return {
        "type": "file",
        "bom-ref": f"file:{lib.path}",
        "name": lib.path,
        "version": lib.version,
        "hashes": [{"alg": "SHA-256", "content": lib.digest()}],
        "properties": _props(pairs),
    }


def gpuprov_bom(
    *,
    kind: str = "image",
    name: str = "registry.example.com/ml/train:1.0",
    digest: str | None = None,
    machine_id: str | None = None,
    owners: list[Owner] | None = None,
    extra_libs: list[Lib] | None = None,
    serial: str | None = None,
    timestamp: str = "2026-11-30T12:00:00Z",
    labels: dict[str, str] | None = None,
    spec_version: str = "1.6",
) -> dict[str, Any]:
    """A report as `gpuprov scan` writes it (CycloneDX 1.6, gpuprov: properties)."""
    owners = owners if owners is not None else [cudnn_wheel(), *cuda_wheels()]
    asset_props: list[tuple[str, str]] = [(v.ASSET_KIND, kind)]
    if kind == "image":
        digest = digest or "sha256:" + digest_of("manifest", name)
        repo = name.rsplit(":", 1)[0]
        purl = f"pkg:oci/{repo.rsplit('/', 1)[-1]}@{digest.replace(':', '%3A')}?arch=amd64"
        asset_props += [
            (v.IMAGE_DIGEST, digest),
            (v.IMAGE_REFERENCE, name),
            (v.IMAGE_PLATFORM, "linux/amd64"),
        ]
        asset: dict[str, Any] = {
            "type": "container",
            "bom-ref": "asset",
            "name": name,
            "version": digest,
            "purl": purl,
        }
    else:
        machine_id = machine_id or digest_of("machine", name)[:32]
        asset_props += [(v.HOST_MACHINE_ID, machine_id), (v.HOST_HOSTNAME, name)]
        asset = {"type": "operating-system", "bom-ref": "asset", "name": name}
    asset_props += [(v.ASSET_LABEL_PREFIX + k, val) for k, val in (labels or {}).items()]
    asset["properties"] = _props(asset_props)
    components: list[dict[str, Any]] = []
    listed: set[str] = set()
    for owner in owners:
        components += [file_component(lib) for lib in owner.libs]
        if owner.purl in listed:  # one component per package, however many installs
            continue
        listed.add(owner.purl)
        components.append(
            {
                "type": "library",
                "bom-ref": owner.purl,
                "name": owner.name,
                "version": owner.version,
                "purl": owner.purl,
            }
        )
    components += [file_component(lib) for lib in extra_libs or []]
    return {
        "$schema": f"http://cyclonedx.org/schema/bom-{spec_version}.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": spec_version,
        "serialNumber": serial or uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": timestamp,
            "tools": {
                "components": [{"type": "application", "name": "gpuprov", "version": "0.1.0"}]
            },
            "component": asset,
        },
        "components": components,
    }


def trivy_bom(
    name: str = "nvcr.io/nvidia/pytorch:24.05-py3", digest: str | None = None
) -> dict[str, Any]:
    """What ``trivy image --format cyclonedx`` emits for an image with NVIDIA wheels and debs."""
    digest = digest or "sha256:" + digest_of("trivy", name)
    purl = (
        f"pkg:oci/pytorch@{digest.replace(':', '%3A')}"
        "?arch=amd64&repository_url=nvcr.io%2Fnvidia%2Fpytorch"
    )
    layer = "sha256:" + digest_of("layer", 1)
    cudnn = "pkg:deb/ubuntu/libcudnn9-cuda-12@9.1.0.70-1?arch=amd64&distro=ubuntu-22.04"
    nccl = "pkg:deb/ubuntu/libnccl2@2.21.5-1%2Bcuda12.4?arch=amd64&distro=ubuntu-22.04"
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": "2026-11-29T08:00:00+00:00",
            "tools": {
                "components": [
                    {
                        "type": "application",
                        "group": "aquasecurity",
                        "name": "trivy",
                        "version": "0.58.1",
                    }
                ]
            },
            "component": {
                "bom-ref": purl,
                "type": "container",
                "name": name,
                "purl": purl,
                "properties": _props(
                    [
                        ("aquasecurity:trivy:ImageID", "sha256:" + digest_of("config", name)),
                        ("aquasecurity:trivy:RepoDigest", f"nvcr.io/nvidia/pytorch@{digest}"),
                        ("aquasecurity:trivy:RepoTag", name),
                        ("aquasecurity:trivy:SchemaVersion", "2"),
                    ]
                ),
            },
        },
        "components": [
            {
                "bom-ref": cudnn,
                "type": "library",
                "name": "libcudnn9-cuda-12",
                "version": "9.1.0.70-1",
                "purl": cudnn,
                "properties": _props(
                    [
                        ("aquasecurity:trivy:LayerDigest", layer),
                        ("aquasecurity:trivy:PkgType", "ubuntu"),
                        ("aquasecurity:trivy:SrcName", "cudnn"),
                    ]
                ),
            },
            {
                "bom-ref": nccl,
                "type": "library",
                "name": "libnccl2",
                "version": "2.21.5-1+cuda12.4",
                "purl": nccl,
            },
            {
                "bom-ref": "pkg:deb/ubuntu/libcudnn9-dev-cuda-12@9.1.0.70-1?arch=amd64",
                "type": "library",
                "name": "libcudnn9-dev-cuda-12",
                "version": "9.1.0.70-1",
                "purl": "pkg:deb/ubuntu/libcudnn9-dev-cuda-12@9.1.0.70-1?arch=amd64",
            },
            {
                "bom-ref": "pkg:pypi/nvidia-cublas-cu12@12.4.5.8",
                "type": "library",
                "name": "nvidia-cublas-cu12",
                "version": "12.4.5.8",
                "purl": "pkg:pypi/nvidia-cublas-cu12@12.4.5.8",
                "properties": _props(
                    [
                        (
                            "aquasecurity:trivy:FilePath",
                            "usr/local/lib/python3.10/dist-packages/nvidia_cublas_cu12-12.4.5.8.dist-info/METADATA",
                        ),
                        ("aquasecurity:trivy:PkgType", "python-pkg"),
                    ]
                ),
            },
            {
                "bom-ref": "pkg:pypi/numpy@1.26.4",
                "type": "library",
                "name": "numpy",
                "version": "1.26.4",
                "purl": "pkg:pypi/numpy@1.26.4",
            },
            {
                "bom-ref": "c3a0b2f6-2f4e-4a53-9d4b-3d3b2e4f8a10",
                "type": "operating-system",
                "name": "ubuntu",
                "version": "22.04",
            },
        ],
        "dependencies": [
            {"ref": purl, "dependsOn": ["c3a0b2f6-2f4e-4a53-9d4b-3d3b2e4f8a10"]},
        ],
    }


def syft_bom(name: str = "ghcr.io/acme/infer:2.3", digest: str | None = None) -> dict[str, Any]:
    """What ``syft IMAGE -o cyclonedx-json`` emits: packages plus ``file`` components."""
    digest = digest or "sha256:" + digest_of("syft", name)
    cudnn_path = "/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9.7.0"
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": "2026-11-28T10:00:00+01:00",
            "tools": {
                "components": [
                    {
                        "type": "application",
                        "author": "anchore",
                        "name": "syft",
                        "version": "1.18.1",
                    }
                ]
            },
            "component": {
                "bom-ref": "6e5f3a1c2b9d8e7f",
                "type": "container",
                "name": name,
                "version": digest,
            },
        },
        "components": [
            {
                "bom-ref": "pkg:rpm/nvidia/libcudnn9-cuda-12@9.7.0.66-1?arch=x86_64&id=ab12",
                "type": "library",
                "name": "libcudnn9-cuda-12",
                "version": "9.7.0.66-1",
                "purl": "pkg:rpm/nvidia/libcudnn9-cuda-12@9.7.0.66-1?arch=x86_64",
                "properties": _props(
                    [
                        ("syft:package:foundBy", "rpm-db-cataloger"),
                        ("syft:package:type", "rpm"),
                        ("syft:location:0:layerID", "sha256:" + digest_of("syft-layer")),
                        ("syft:location:0:path", "/var/lib/rpm/rpmdb.sqlite"),
                    ]
                ),
            },
            {
                "bom-ref": "3f2a1b0c9d8e7f6a",
                "type": "file",
                "name": cudnn_path,
                "hashes": [
                    {"alg": "SHA-1", "content": hashlib.sha1(cudnn_path.encode()).hexdigest()},
                    {"alg": "SHA-256", "content": digest_of(cudnn_path, "9.7.0")},
                ],
            },
            {
                "bom-ref": "4a3b2c1d0e9f8a7b",
                "type": "file",
                "name": "/usr/lib64/libz.so.1",
                "hashes": [{"alg": "SHA-256", "content": digest_of("libz")}],
            },
        ],
    }


def cdxgen_bom(name: str = "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime") -> dict:
    """What cdxgen 11 emits for an image: CycloneDX 1.7, image facts as metadata properties."""
    repo_digest = "sha256:" + digest_of("cdxgen", name)
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.7",
        "serialNumber": uuid.uuid4().urn,
        "version": 1,
        "metadata": {
            "timestamp": "2026-11-27T09:30:00Z",
            "tools": {
                "components": [
                    {
                        "group": "@cyclonedx",
                        "name": "cdxgen",
                        "version": "11.11.0",
                        "type": "application",
                        "bom-ref": "pkg:npm/@cyclonedx/cdxgen@11.11.0",
                    }
                ]
            },
            "component": {
                "name": name.rsplit(":", 1)[0],
                "version": name.rsplit(":", 1)[1],
                "type": "container",
                "bom-ref": f"pkg:oci/pytorch@{name.rsplit(':', 1)[1]}",
                "purl": f"pkg:oci/pytorch@{name.rsplit(':', 1)[1]}",
            },
            "properties": _props(
                [
                    ("oci:image:Id", "sha256:" + digest_of("cdxgen-config")),
                    ("oci:image:RepoTag", name),
                    ("oci:image:RepoDigest", f"pytorch/pytorch@{repo_digest}"),
                    ("oci:image:Os", "linux"),
                ]
            ),
        },
        "components": [
            {
                "type": "library",
                "name": "nvidia-cudnn-cu12",
                "version": "9.1.0.70",
                "purl": "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70",
                "bom-ref": "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70",
            },
            {
                "type": "library",
                "name": "cudnn",
                "version": "9.1.1.17",
                "purl": "pkg:conda/cudnn@9.1.1.17?build=h1a1b2c3_0&channel=conda-forge",
                "bom-ref": "pkg:conda/cudnn@9.1.1.17?build=h1a1b2c3_0&channel=conda-forge",
            },
            {
                "type": "library",
                "name": "torch",
                "version": "2.5.1",
                "purl": "pkg:pypi/torch@2.5.1",
                "bom-ref": "pkg:pypi/torch@2.5.1",
            },
        ],
    }


def encode(bom: dict[str, Any]) -> bytes:
    """The report's bytes as an agent sends them."""
    return json.dumps(bom, indent=1).encode()
