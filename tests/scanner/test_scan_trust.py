"""Provenance in the scan: a signed catalog from a golden scan gives verified / conflict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuprov.cli import app
from tests.fixtures.elf import build_cudnn_library
from tests.fixtures.keys import generate, write_keypair

runner = CliRunner()


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("trust")
    root = base / "root"
    lib = root / "opt" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    for component in ("cudnn_graph", "cudnn_ops"):
        build_cudnn_library(lib, component, filename=f"lib{component}.so.9.1.0")
    report = base / "golden.cdx.json"
    res = runner.invoke(
        app, ["scan", str(root), "--no-cache", "-f", "cyclonedx", "-o", str(report)]
    )
    assert res.exit_code == 0, res.output
    unsigned = base / "catalog.json"
    res = runner.invoke(app, ["catalog", "from-scan", str(report), "-o", str(unsigned)])
    assert res.exit_code == 0, res.output
    priv, pub = write_keypair(base, "vendor", generate("ecdsa"))
    signed = base / "catalog.dsse.json"
    res = runner.invoke(
        app, ["catalog", "sign", str(unsigned), "--key", str(priv), "-o", str(signed)]
    )
    assert res.exit_code == 0, res.output
    return {"root": root, "catalog": signed, "pub": pub, "base": base}


def _scan(root: Path, *extra: str) -> tuple[int, dict[str, dict[str, str]], str]:
    res = runner.invoke(app, ["scan", str(root), "--no-cache", "-f", "json", *extra])
    if res.exit_code not in (0, 1):
        return res.exit_code, {}, res.output
    doc = json.loads(res.stdout)
    libs = {
        lib["ref"]["path"]: {
            "provenance": lib["provenance"],
            "signer": lib["provenance_signer"],
            "reason": lib["provenance_reason"],
        }
        for lib in doc["libraries"]
    }
    return res.exit_code, libs, res.output


def test_clean_copy_is_verified_and_tampered_is_conflict(
    golden: dict[str, Path], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    shutil.copytree(golden["root"], root, symlinks=True)
    target = root / "opt" / "cudnn" / "lib" / "libcudnn_ops.so.9.1.0"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    args = ("--catalog", str(golden["catalog"]), "--trust-key", str(golden["pub"]))
    code, libs, _ = _scan(root, *args)
    assert code == 0
    graph = libs["/opt/cudnn/lib/libcudnn_graph.so.9.1.0"]
    assert graph["provenance"] == "verified"
    assert graph["signer"]
    ops = libs["/opt/cudnn/lib/libcudnn_ops.so.9.1.0"]
    assert ops["provenance"] == "conflict"
    code, _, out = _scan(root, *args, "--fail-on", "conflict")
    assert code == 1
    assert "libcudnn_ops.so.9.1.0" in out


def test_catalog_signed_by_another_key_stops_the_scan(golden: dict[str, Path]) -> None:
    _, other = write_keypair(golden["base"], "intruder", generate("ecdsa"))
    code, _, out = _scan(
        golden["root"], "--catalog", str(golden["catalog"]), "--trust-key", str(other)
    )
    assert code == 2
    assert "error:" in out and "Traceback" not in out


def test_catalog_without_trust_is_a_usage_error(golden: dict[str, Path]) -> None:
    code, _, out = _scan(golden["root"], "--catalog", str(golden["catalog"]))
    assert code == 2
    assert "--trust" in out


def test_provenance_lands_in_the_bom(golden: dict[str, Path]) -> None:
    res = runner.invoke(
        app,
        [
            "scan",
            str(golden["root"]),
            "--no-cache",
            "-f",
            "cyclonedx",
            "--catalog",
            str(golden["catalog"]),
            "--trust-key",
            str(golden["pub"]),
        ],
    )
    assert res.exit_code == 0, res.output
    bom = json.loads(res.stdout)
    files = [c for c in bom["components"] if c["type"] == "file"]
    assert files
    for comp in files:
        props = {p["name"]: p["value"] for p in comp.get("properties", [])}
        assert props["gpuprov:provenance"] == "verified"
        assert props["gpuprov:provenance:catalog"]
        assert props["gpuprov:provenance:signer"]
