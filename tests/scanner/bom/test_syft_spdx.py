"""Syft's own SPDX 2.3 of real NVIDIA wheels (recorded, tests/fixtures/spdx/): read offline and
gated by `gpuprov gate --bom` to the same facts as Syft's CycloneDX of the same input (issue 21).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app
from scanner.bom.spdx_mapping import read_spdx
from scanner.policy.bom_facts import BomError, facts_from_bom
from scanner.policy.facts import AssetFacts
from tests.scanner import syft_documents as sd

KINDS = ("image", "dir")
POLICY = """apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: prod
rules:
  integrity: {}
  versions: {minimum: {cudart: '12'}}
"""


def facts(kind: str, fmt: str) -> AssetFacts:
    return facts_from_bom((sd.FIXTURES / sd.DOCUMENTS[kind, fmt]).read_bytes())


def rows(asset: AssetFacts) -> list[tuple[Any, ...]]:
    return sorted((f.path, f.sha256, f.family, f.version, f.owner) for f in asset.files)


def expected_rows() -> list[tuple[Any, ...]]:
    """Each wheel's runtime package, where Syft found it (its METADATA): no SHA-256, because
    Syft's default SPDX gives the wheels' libcudart an all-zero SHA-1 and no SHA-256."""
    out = []
    for project, version, site in sd.WHEELS:
        dist = f"{project.replace('-', '_')}-{version}.dist-info"
        out.append(
            (f"{site}/{dist}/METADATA", None, "cudart", version, f"pkg:pypi/{project}@{version}")
        )
    return sorted(out)


@pytest.mark.parametrize("kind", KINDS)
def test_syft_spdx_reads_as_its_cyclonedx(kind: str) -> None:
    spdx, cdx = facts(kind, "spdx-json"), facts(kind, "cyclonedx-json")
    assert (spdx.kind, spdx.name, spdx.digest) == (cdx.kind, cdx.name, cdx.digest)
    assert spdx.kind.value == ("image" if kind == "image" else "host")
    assert rows(spdx) == rows(cdx) == expected_rows()
    assert spdx.producer == cdx.producer == "syft 1.18.1"
    assert all(f.integrity is None and f.provenance is None for f in spdx.files)


def test_the_image_is_the_recorded_image() -> None:
    image = facts("image", "spdx-json")
    doc = sd.recorded("image", "spdx-json")
    (root,) = [p for p in doc["packages"] if p.get("primaryPackagePurpose") == "CONTAINER"]
    assert image.digest == root["versionInfo"] and image.digest.startswith("sha256:")
    assert image.name == sd.IMAGE_TAG + ".tar"


@pytest.mark.parametrize("kind", KINDS)
def test_libraries_without_sha256_are_skipped_with_a_note(kind: str) -> None:
    mapped = read_spdx(sd.recorded(kind, "spdx-json"))
    files = {c["name"]: c for c in mapped.bom["components"] if c["type"] == "file"}
    so = sorted(n for n in files if ".so." in n)
    assert so == sorted(
        [
            "/opt/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13",
            "/usr/local/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
        ]
    )
    assert all(files[n]["hashes"] == [] for n in so)  # Syft's SHA-1 is 40 zeros, no SHA-256
    from scanner.bom.foreign import gpu_libraries

    skipped = gpu_libraries(mapped.bom).skipped
    assert sorted(skipped) == [f"ingest: {n}: file component without a SHA-256 hash" for n in so]


@pytest.mark.parametrize("kind", KINDS)
def test_gate_bom_decides_the_same_offline(kind: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    answers = {}
    for fmt in ("spdx-json", "cyclonedx-json"):
        bom = sd.FIXTURES / sd.DOCUMENTS[kind, fmt]
        result = CliRunner().invoke(
            app, ["gate", "--bom", str(bom), "--policy-file", str(policy), "-f", "json"]
        )
        assert result.exit_code == 1, result.output  # deny: no integrity verdict from Syft
        answers[fmt] = json.loads(result.stdout)
    spdx, cdx = answers["spdx-json"], answers["cyclonedx-json"]
    assert spdx["decision"] == cdx["decision"] == "deny"
    # two runs of Syft: the documents' creation times differ by a second or so
    assert {**spdx["subject"], "scanned_at": None} == {**cdx["subject"], "scanned_at": None}
    assert [(r["rule"], r["missing_input"]) for r in spdx["reasons"]] == [
        (r["rule"], r["missing_input"]) for r in cdx["reasons"]
    ]
    integrity = next(r for r in spdx["reasons"] if r["rule"] == "integrity")
    assert integrity["missing_input"] is True and "syft 1.18.1" in integrity["message"]


# --- a root filesystem: a host in both formats, or in neither -------------------------------


def _refusal(kind: str, fmt: str) -> str:
    with pytest.raises(BomError) as refused:
        facts(kind, fmt)
    return str(refused.value)


def test_a_root_with_an_os_database_is_a_host_in_both() -> None:
    for fmt in ("spdx-json", "cyclonedx-json"):
        asset = facts("dir", fmt)
        assert (asset.kind.value, asset.name) == ("host", "root")
    # what tells it in SPDX: the deb package's purl (Syft writes one only for a known distro)
    spdx = sd.recorded("dir", "spdx-json")
    purls = [r["referenceLocator"] for p in spdx["packages"] for r in p.get("externalRefs", ())]
    assert "pkg:deb/debian/base-files@12.4%2Bdeb12u5?arch=amd64&distro=debian-12" in purls
    assert not any(p.get("primaryPackagePurpose") == "OPERATING-SYSTEM" for p in spdx["packages"])


def test_a_root_without_os_release_is_no_host_in_either() -> None:
    assert "neither an image nor a host" in _refusal("no-os-dir", "cyclonedx-json")
    message = _refusal("no-os-dir", "spdx-json")
    assert message.startswith("SPDX primaryPackagePurpose: ") and "neither" in message


def test_a_root_without_an_os_database_is_a_host_only_in_cyclonedx() -> None:
    """Syft 1.18's SPDX of a root with os-release and no package database lists no OS at all
    (anchore/syft#3012): its SPDX is refused, naming why and what to send, its CycloneDX read."""
    assert facts("bare-dir", "cyclonedx-json").kind.value == "host"
    message = _refusal("bare-dir", "spdx-json")
    assert message.startswith("SPDX primaryPackagePurpose: ")
    assert "anchore/syft#3012" in message and "-o cyclonedx-json" in message
    # nothing to read it from: no OS package, no os-release, no distro anywhere in the SPDX
    text = json.dumps(sd.recorded("bare-dir", "spdx-json")).lower()
    assert not any(word in text for word in ("debian", "os-release", "operating-system"))
    assert "debian" in json.dumps(sd.recorded("bare-dir", "cyclonedx-json")).lower()


# --- every file digested: what Syft's SPDX carries beyond its CycloneDX ----------------------


def test_with_every_file_digested_the_spdx_adds_the_libraries_with_their_sha256() -> None:
    """`SYFT_FILE_METADATA_SELECTION=all`: Syft's SPDX lists each wheel's libcudart with its
    SHA-256 (its CycloneDX lists no files), so the SPDX stores these files besides the runtime
    packages both formats give; Syft relates no package to them, so they have no owner."""
    spdx, cdx = facts("image-files", "spdx-json"), facts("image-files", "cyclonedx-json")
    assert rows(cdx) == expected_rows()
    extra = sorted(set(rows(spdx)) - set(rows(cdx)))
    assert sorted(set(rows(spdx)) & set(rows(cdx))) == expected_rows()
    doc = sd.recorded("image-files", "spdx-json")
    listed = {
        "/" + f["fileName"]: next(
            c["checksumValue"] for c in f["checksums"] if c["algorithm"] == "SHA256"
        )
        for f in doc["files"]
        if ".so." in f["fileName"]
    }
    assert [(path, sha, family, owner) for path, sha, family, _, owner in extra] == [
        (path, listed[path], "cudart", None) for path in sorted(listed)
    ]
    assert sorted(listed) == [
        "/opt/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13",
        "/usr/local/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12",
    ]
