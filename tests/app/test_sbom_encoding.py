"""How app/domain/inventory/sbom.py hands its model to the library: the document is the one the
library's own ``output_as_string(indent=2)`` writes, and the cheap insertion orders agree with the
library's comparisons (where one did not, the document would be the same, only slower)."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

from cyclonedx.output import make_outputter
from cyclonedx.schema import OutputFormat, SchemaVersion

from app.domain.inventory import sbom
from app.storage.tables import Artifact, Asset, Package, Scan


def _rows() -> tuple[Asset, Scan, list[Package], list[Artifact]]:
    """A scan whose components tie on every leading field but one: the same names as files and
    libraries, versions and none, upper and lower case, non-ASCII, purls and none, duplicate
    paths, files of no package and of a package not in the scan, a copy a process loaded."""
    rng = random.Random(8)
    asset = Asset(
        id=3,
        kind="image",
        name="registry.example.com/ml/mixed:1",
        labels={"team": "ü", "tier": "gold"},
        details={"digest": "sha256:" + "a" * 64, "platform": "linux/amd64"},
    )
    scan = Scan(
        id=11,
        content_sha256="b" * 64,
        scanned_at=datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
        tool="gpuprov 0.1.0",
        slsa_level=2,
        signature_rejected=["key-1"],
    )
    names = ["torch", "Torch", "libz.so", "ünï", "nvidia-cudnn-cu12"]
    packages = []
    for n in range(30):
        name = rng.choice(names)
        version = rng.choice([None, "", "1.0", "2.0", "10.0"])
        purl = rng.choice(
            [None, f"pkg:pypi/{name.lower()}@{version or 0}", f"pkg:pypi/{name}", "not a purl"]
        )
        packages.append(Package(id=n + 1, purl=purl, name=name, version=version))
    owners = [p.purl for p in packages if p.purl] + [None, "pkg:pypi/absent@1"]
    artifacts = []
    for n in range(80):
        loaded = rng.random() < 0.2
        artifacts.append(
            Artifact(
                kind=rng.choice(["file", "file", "file", "package"]),
                name=rng.choice([*names, f"lib{n}.so"]),
                path=rng.choice([None, f"/usr/lib/lib{rng.randint(0, 20)}.so", "/same.so"]),
                family="cudnn",
                version=rng.choice([None, "9.1.0"]),
                cuda_major=rng.choice([None, 12]),
                sha256=rng.choice([None, f"{rng.getrandbits(256):064x}"]),
                integrity=rng.choice([None, "verified", "modified"]),
                provenance="unknown",
                owner_purl=rng.choice(owners),
                aliases=rng.choice([[], ["a.so", "b.so"]]),
                notes=rng.choice([[], ["n"], ["n", "n", "m"]]),
                loaded_processes=2 if loaded else 0,
                loaded_containers=1,
                loaded_copy=loaded and rng.random() < 0.5,
                loaded_deleted=False,
                loaded_by=[{"pid": 7, "comm": "python"}] if loaded else [],
            )
        )
    return asset, scan, packages, artifacts


def test_the_document_is_the_librarys_indented_output() -> None:
    rows = _rows()
    bom = sbom.normalized_bom(*rows)
    plain = make_outputter(bom, OutputFormat.JSON, SchemaVersion.V1_6).output_as_string(indent=2)
    doc = sbom.encode_normalized(*rows)
    assert doc == plain
    assert len(json.loads(doc)["components"]) > 60


def test_the_insertion_orders_are_the_librarys() -> None:
    bom = sbom.normalized_bom(*_rows())
    components = list(bom.components)  # in the library's order
    assert sorted(components, key=sbom._component_order) == components
    assert len({c.type for c in components}) == 2
    dependencies = list(bom.dependencies)
    assert sorted(dependencies, key=sbom._dependency_order) == dependencies
    for dependency in dependencies:
        inner = list(dependency.dependencies)
        assert sorted(inner, key=sbom._dependency_order) == inner
    assert max(len(d.dependencies) for d in dependencies) > 5
