"""The service's indexed verdicts equal the scanner's `provenance_verdict` over whole catalogs."""

from __future__ import annotations

import random

from app.domain.provenance import NO_TRUSTED_CATALOG, ActiveCatalogs, CatalogRef
from scanner.model import Sha256
from scanner.refcatalog.model import CatalogEntry
from scanner.verify.provenance import Provenance, VerifiedCatalog, provenance_verdict

FAMILIES = ("cudnn", "cudart", "nccl", None)
VERSIONS = ("9.1.0.70", "9.1.0", "9.1", "9.1.1", "12.4.127", "12.4", None)
NAMES = (
    "lib/libcudnn_graph.so.9",
    "/usr/lib/libcudnn_graph.so.9.1.0",
    "nvidia/cuda_runtime/lib/libcudart.so.12",
    "libnccl.so.2",
    "/opt/x/libnccl.so.2.21.5",
)
PACKAGES = ("pkg:pypi/nvidia-cudnn-cu12@9.1.0.70", "pkg:pypi/nvidia_cudnn_cu12@9.1.0.70", None)
DIGESTS = tuple(Sha256(f"{i:064x}") for i in range(6))
PATHS = (
    "/site/nvidia/cudnn/lib/libcudnn_graph.so.9",
    "/usr/lib/libcudnn_graph.so.9.1.0",
    "/site/nvidia/cuda_runtime/lib/libcudart.so.12",
    "/usr/lib/libnccl.so.2",
    "/opt/x/libnccl.so.2.21.5",
    "/elsewhere/libfoo.so",
)


def _entry(rng: random.Random) -> CatalogEntry:
    return CatalogEntry(
        name=rng.choice(NAMES),
        sha256=rng.choice(DIGESTS),
        family=rng.choice(FAMILIES),
        version=rng.choice(VERSIONS),
        cuda_major=rng.choice((11, 12, None)),
        arch=rng.choice(("x86_64", "aarch64", None)),
        package=rng.choice(PACKAGES),
    )


def test_indexed_verdicts_match_full_catalogs() -> None:
    rng = random.Random(20261201)
    kinds = set()
    for _ in range(60):
        full = [
            VerifiedCatalog(f"c{c}", f"signer{c}", tuple(_entry(rng) for _ in range(12)))
            for c in range(rng.randint(1, 3))
        ]
        active = ActiveCatalogs(
            [CatalogRef(i, c.name, c.signer) for i, c in enumerate(full)],
            [c.entries for c in full],
        )
        for _ in range(40):
            path = rng.choice(PATHS)
            args = (path, rng.choice(FAMILIES[:-1]), rng.choice(VERSIONS), rng.choice(DIGESTS))
            options = {
                "cuda_major": rng.choice((11, 12, None)),
                "arch": rng.choice(("x86_64", None)),
            }
            purl = rng.choice(PACKAGES)
            expected = provenance_verdict(*args, full, **options, package_purl=purl)
            assert active.verdict(*args, **options, owner_purl=purl) == expected, (args, purl)
            kinds.add(expected.provenance)
    assert kinds == set(Provenance)  # the sample exercised every outcome


def test_no_trusted_catalog() -> None:
    verdict = ActiveCatalogs([], []).verdict("/x/libnccl.so.2", "nccl", "2.21.5", "0" * 64)
    assert (verdict.provenance, verdict.reason) == (Provenance.UNKNOWN, NO_TRUSTED_CATALOG)
