"""OSV records matched offline against real package metadata: a Debian 12 root with a real dpkg
database (``libcuda1`` built from ``nvidia-graphics-drivers``, a binNMU) and a real pip-installed
``nvidia-cudnn-cu12`` wheel, scanned by gpuprov; its BOM carries the source package, and
``gpuprov scan --vex-out`` and ``gpuprov gate --bom --advisories`` match the record with the
service's matcher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app as cli_app
from scanner import vocabulary as V
from scanner.advisories.document import schema_errors
from tests.fixtures import elf
from tests.fixtures import packages as pk
from tests.scanner.advisories.test_vex import openvex_errors

CVE = "CVE-2026-5151"
LIB = "/usr/lib/x86_64-linux-gnu"


def run(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _record() -> dict[str, Any]:
    def ranges(fixed: str) -> list[dict[str, Any]]:
        return [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": fixed}]}]

    return {
        "schema_version": "1.6.0",
        "id": "GHSA-5151-5151-5151",
        "modified": "2026-11-02T00:00:00Z",
        "aliases": [CVE],
        "summary": "wheel and driver",
        "affected": [
            {
                "package": {"ecosystem": "PyPI", "name": "nvidia_cudnn_cu12"},
                "ranges": ranges("9.1.0.70"),
            },
            {
                "package": {"ecosystem": "Debian:12", "name": "nvidia-graphics-drivers"},
                "ranges": ranges("535.274.02-1~deb12u1"),
            },
        ],
        "database_specific": {"severity": "CRITICAL"},
    }


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(root, its CycloneDX BOM, a feed directory holding the record)."""
    base = tmp_path_factory.mktemp("osv")
    root = base / "root"
    pk.write_os_release(root, "debian", "12")
    libcuda = elf.build_driver_library(base / "lib", "cuda", "535.261.03")
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "libcuda1",
                "535.261.03-1+b1",
                files={f"{LIB}/{libcuda.name}": libcuda.read_bytes()},
                source="nvidia-graphics-drivers (535.261.03-1)",
            )
        ],
        base / "debs",
    )
    cudnn = elf.build_cuda_library(base / "wheel", "cudnn", "9.0.0")
    wheel = pk.build_wheel(
        base,
        "nvidia-cudnn-cu12",
        "9.0.0.312",
        {"nvidia/cudnn/lib/libcudnn.so.9": cudnn.read_bytes()},
    )
    pk.pip_install(root / "usr/local/lib/python3.11/dist-packages", [wheel])
    bom = base / "bom.json"
    code, _, err = run("scan", root, "-f", "cyclonedx", "-o", bom, "--no-cache", "-q")
    assert code == 0, err
    feed = base / "feed"
    feed.mkdir()
    record = _record()
    assert schema_errors("osv", record) == []
    (feed / "GHSA-5151-5151-5151.json").write_text(json.dumps(record))
    return root, bom, feed


def test_the_bom_names_the_source_package(scanned: tuple[Path, Path, Path]) -> None:
    _, bom, _ = scanned
    doc = json.loads(bom.read_text())
    (deb,) = [c for c in doc["components"] if c.get("purl", "").startswith("pkg:deb/")]
    props = {p["name"]: p["value"] for p in deb["properties"]}
    assert deb["version"] == "535.261.03-1+b1"
    assert props[V.PACKAGE_SOURCE_NAME] == "nvidia-graphics-drivers"
    assert props[V.PACKAGE_SOURCE_VERSION] == "535.261.03-1"
    (wheel,) = [c for c in doc["components"] if c.get("purl", "").startswith("pkg:pypi/")]
    assert V.PACKAGE_SOURCE_NAME not in {p["name"] for p in wheel["properties"]}


def test_scan_vex_out_states_both_packages(
    scanned: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    root, _, feed = scanned
    vex = tmp_path / "vex.json"
    code, _, err = run(
        "scan", root, "-f", "json", "-o", tmp_path / "r.json", "--no-cache", "-q",
        "--no-node-facts", "--vex-out", vex, "--advisories", feed,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(vex.read_text())
    assert openvex_errors(doc) == []
    subs = {
        s["products"][0]["subcomponents"][0]["@id"]: s["status"]
        for s in doc["statements"]
        if s["vulnerability"]["name"] == CVE
    }
    assert len(subs) == 2
    (wheel,) = [k for k in subs if k.startswith("pkg:pypi/")]
    assert wheel == "pkg:pypi/nvidia-cudnn-cu12@9.0.0.312" and subs[wheel] == "affected"
    (deb,) = [k for k in subs if k.startswith("pkg:deb/")]
    assert "libcuda1@535.261.03-1%2Bb1" in deb and subs[deb] == "affected"


def test_gate_denies_on_the_record(scanned: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, bom, feed = scanned
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules:\n"
        "  advisories: {min_severity: critical}\n"
    )
    code, out, err = run(
        "gate", "--bom", bom, "--policy-file", policy, "-f", "json", "--advisories", feed
    )
    assert code == 1, err
    (rule,) = [r for r in json.loads(out)["rules"] if r["rule"] == "advisories"]
    assert rule["status"] == "fail" and rule["evidence"]["affected"] == CVE
    assert "PyPI/nvidia_cudnn_cu12 9.0.0.312" in rule["message"]
