"""Provenance verdicts from verified catalogs: verified, conflict (two rules), unknown."""

from __future__ import annotations

import pytest

from scanner import vocabulary as V
from scanner.model import Sha256
from scanner.refcatalog.model import CatalogEntry
from scanner.verify.provenance import (
    Provenance,
    VerifiedCatalog,
    provenance_verdict,
    versions_match,
)

GRAPH = Sha256("11" * 32)
OPS = Sha256("22" * 32)
CUDART = Sha256("33" * 32)
EVIL = Sha256("ee" * 32)
WHEEL = "pkg:pypi/nvidia-cudnn-cu12@9.1.0.70"


def _catalog() -> VerifiedCatalog:
    entries = (
        CatalogEntry(
            "nvidia/cudnn/lib/libcudnn_graph.so.9",
            GRAPH,
            "cudnn",
            "cudnn_graph",
            "9.1.0.70",
            12,
            "x86_64",
            package=WHEEL,
        ),
        CatalogEntry(
            "nvidia/cudnn/lib/libcudnn_ops.so.9",
            OPS,
            "cudnn",
            "cudnn_ops",
            "9.1.0.70",
            12,
            "x86_64",
            package=WHEEL,
        ),
        CatalogEntry("lib/libcudart.so.12.4.127", CUDART, "cudart", "cudart", "12.4.127"),
    )
    return VerifiedCatalog("nvidia wheels", "nvidia-key (ecdsa-p256 key sha256:ab)", entries)


SITE = "/usr/lib/python3/site-packages/nvidia/cudnn/lib"


def test_verified_by_digest_whatever_the_path() -> None:
    v = provenance_verdict("/opt/x/libcudnn_graph.so.9", "cudnn", "9.1.0", GRAPH, [_catalog()])
    assert v.provenance is Provenance.VERIFIED
    assert v.signer == "nvidia-key (ecdsa-p256 key sha256:ab)" and v.catalog == "nvidia wheels"
    assert (V.PROVENANCE, "verified") in v.properties()
    assert (V.PROVENANCE_CATALOG, "nvidia wheels") in v.properties()
    upper = provenance_verdict("/x", None, None, GRAPH.upper(), [_catalog()])
    assert upper.provenance is Provenance.VERIFIED


def test_conflict_same_library_and_version() -> None:
    v = provenance_verdict(
        "/usr/lib/x86_64-linux-gnu/libcudnn_graph.so.9.1.0",
        "cudnn",
        "9.1.0",
        EVIL,
        [_catalog()],
        cuda_major=12,
        arch="x86_64",
    )
    assert v.provenance is Provenance.CONFLICT
    assert "libcudnn_graph.so.9" in v.reason and "sha256:eeee" in v.reason
    assert v.properties()[0] == (V.PROVENANCE, "conflict")


def test_conflict_by_path_in_the_same_package() -> None:
    # No family/version from detection, but pip says this file is that wheel's.
    v = provenance_verdict(
        f"{SITE}/libcudnn_ops.so.9", None, None, EVIL, [_catalog()], package_purl=WHEEL
    )
    assert v.provenance is Provenance.CONFLICT and "pkg:pypi/nvidia-cudnn-cu12" in v.reason
    pkg_other_version = "pkg:pypi/nvidia-cudnn-cu12@9.2.0.82"
    v = provenance_verdict(
        f"{SITE}/libcudnn_ops.so.9", None, None, EVIL, [_catalog()], package_purl=pkg_other_version
    )
    assert v.provenance is Provenance.UNKNOWN
    # purl names compare PEP 503-normalized
    v = provenance_verdict(
        f"{SITE}/libcudnn_ops.so.9",
        None,
        None,
        EVIL,
        [_catalog()],
        package_purl="pkg:pypi/NVIDIA_cudnn.cu12@9.1.0.70",
    )
    assert v.provenance is Provenance.CONFLICT


@pytest.mark.parametrize(
    ("path", "family", "version", "kwargs"),
    [
        ("/l/libcudnn_graph.so.9", "cudnn", "9.2.0", {}),  # other version: not known
        ("/l/libcudnn_graph.so.9", "cudnn", "9.1.0", {"cuda_major": 11}),  # other CUDA build
        ("/l/libcudnn_graph.so.9", "cudnn", "9.1.0", {"arch": "aarch64"}),  # other arch
        ("/l/libcudnn_adv.so.9", "cudnn", "9.1.0", {}),  # sub-library the catalog lacks
        ("/l/libnccl.so.2", "nccl", "2.21.5", {}),
        ("/l/libcudnn_graph.so.9", None, None, {}),  # unidentified
    ],
)
def test_unknown(
    path: str, family: str | None, version: str | None, kwargs: dict[str, object]
) -> None:
    v = provenance_verdict(path, family, version, EVIL, [_catalog()], **kwargs)
    assert v.provenance is Provenance.UNKNOWN and v.signer is None


def test_unknown_without_digest_or_catalog() -> None:
    assert provenance_verdict("/l/x.so", "cudnn", "9", None, [_catalog()]).reason.startswith(
        "the file could not be hashed"
    )
    assert provenance_verdict("/l/x.so", "cudnn", "9", EVIL, []).provenance is Provenance.UNKNOWN


def test_cudart_tarball_name_conflicts() -> None:
    v = provenance_verdict(
        "/usr/local/cuda/lib64/libcudart.so.12.4.127", "cudart", "12.4.127", EVIL, [_catalog()]
    )
    assert v.provenance is Provenance.CONFLICT


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("9.1.0", "9.1.0.70", True),
        ("9.1.0.70", "9.1.0", True),
        ("9.1", "9.1.0.70", False),  # too short to name a release
        ("9.1.0", "9.1.01", False),
        ("12.4.127", "12.4.127", True),
        (None, "1.2.3", False),
    ],
)
def test_versions_match(a: str | None, b: str | None, same: bool) -> None:
    assert versions_match(a, b) is same
