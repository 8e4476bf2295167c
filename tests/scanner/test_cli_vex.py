"""`gpuprov scan --vex-out` offline: a root built from real files (an ELF cuobjdump with its
version banner, a CUDA 11.8 ``version.json``, a cudart library) matched against NVIDIA's
shared bulletins, written as OpenVEX v0.2.0 and CycloneDX 1.6 VEX and validated; usage errors
exit 2 with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scanner.advisories.vex_in import read_vex
from scanner.bom.cyclonedx import validate_json
from tests.fixtures import elf
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.advisories.test_vex import openvex_errors
from tests.scanner.test_cli import invoke, plain

BULLETINS = [PSIRT / "2023/5446", PSIRT / "2022/5373", PSIRT / "2024/5577"]


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


@pytest.fixture(scope="module")
def toolkit_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vex") / "root"
    tk = root / "usr/local/cuda-11.8"
    (tk / "bin").mkdir(parents=True)
    (tk / "version.json").write_text(
        json.dumps(
            {
                "cuda": {"name": "CUDA SDK", "version": "11.8.0"},
                "cuda_cuobjdump": {"name": "CUDA cuobjdump", "version": "11.8.86"},
            }
        )
    )
    elf.build_tool(tk / "bin", "cuobjdump", ["Cuda compilation tools, release 11.8, V11.8.86"])
    elf.build_cuda_library(tk / "lib64", "cudart", "11.8.89")
    return root


def _scan(root: Path, out: Path, *extra: str) -> tuple[int, str]:
    args = ["scan", str(root), "-f", "json", "-o", str(out / "report.json"), "--no-cache", "-q"]
    args += ["--no-node-facts", *extra]
    result = invoke(args)
    return result.exit_code, plain(result.output)


def _advisories(paths: list[Path] = BULLETINS) -> list[str]:
    return [a for p in paths for a in ("--advisories", str(p))]


def test_scan_writes_valid_openvex_of_the_root(toolkit_root: Path, tmp_path: Path) -> None:
    vex = tmp_path / "root.openvex.json"
    code, _ = _scan(toolkit_root, tmp_path, "--vex-out", str(vex), *_advisories())
    assert code == 0
    doc = json.loads(vex.read_text())
    assert openvex_errors(doc) == []
    by = {s["vulnerability"]["name"]: s for s in doc["statements"]}
    # cuobjdump of 11.8: affected by CVE-2023-0193 (prior to 12.1), fixed for CVE-2022-34667
    assert by["CVE-2023-0193"]["status"] == "affected"
    assert "12.1" in by["CVE-2023-0193"]["action_statement"]
    (sub,) = by["CVE-2023-0193"]["products"][0]["subcomponents"]
    assert sub["@id"] == "pkg:generic/nvidia/cuobjdump@11.8.86"
    assert len(sub["hashes"]["sha-256"]) == 64
    assert by["CVE-2022-34667"]["status"] == "fixed"
    # nvdisasm (CVE-2024-0123) is not in the root: not affected, component not present
    assert by["CVE-2024-0123"]["status"] == "not_affected"
    assert by["CVE-2024-0123"]["justification"] == "component_not_present"
    assert doc["author"] == "gpuprov"
    # the same root and feed: the same document, byte for byte
    again = tmp_path / "again.json"
    assert _scan(toolkit_root, tmp_path, "--vex-out", str(again), *_advisories())[0] == 0
    assert again.read_bytes() == vex.read_bytes()


def test_scan_writes_valid_cyclonedx_vex_with_the_same_statements(
    toolkit_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_VEX_AUTHOR", "Example Corp PSIRT")
    cdx, ovx = tmp_path / "root.cdx.json", tmp_path / "root.openvex.json"
    code, _ = _scan(
        toolkit_root,
        tmp_path,
        "--vex-out",
        str(cdx),
        "--vex-format",
        "cyclonedx",
        *_advisories(),
    )
    assert code == 0
    assert validate_json(cdx.read_text()) is None
    bom = json.loads(cdx.read_text())
    assert bom["metadata"]["authors"] == [{"name": "Example Corp PSIRT"}]
    states = {v["id"]: v["analysis"]["state"] for v in bom["vulnerabilities"]}
    assert states["CVE-2023-0193"] == "exploitable" and states["CVE-2022-34667"] == "resolved"
    assert _scan(toolkit_root, tmp_path, "--vex-out", str(ovx), *_advisories())[0] == 0

    def neutral(path: Path) -> list[tuple[object, ...]]:
        return sorted(
            (s.cve, s.state, s.justification, s.component, s.detail, s.action, s.author)
            for s in read_vex(path.read_bytes()).statements
        )

    assert neutral(cdx) == neutral(ovx)


def test_a_root_no_bulletin_names_gets_no_openvex_file(tmp_path: Path) -> None:
    root = tmp_path / "cudnn"
    elf.build_cuda_library(root / "usr/lib/x86_64-linux-gnu", "cudnn", "8.9.7")
    vex = tmp_path / "none.json"
    code, output = _scan(root, tmp_path, "--vex-out", str(vex), *_advisories())
    assert code == 0 and not vex.exists()
    assert "nothing to state" in output and "not written" in output
    cdx = tmp_path / "none.cdx.json"
    code, _ = _scan(
        root, tmp_path, "--vex-out", str(cdx), "--vex-format", "cyclonedx", *_advisories()
    )
    assert code == 0 and validate_json(cdx.read_text()) is None
    assert "vulnerabilities" not in json.loads(cdx.read_text())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--vex-out", "{out}/v.json"], "--vex-out: needs --advisories PATH"),
        (["--advisories", str(PSIRT / "2023/5446")], "--advisories: only applies with --vex-out"),
        (["--vex-format", "cyclonedx"], "--vex-format: only applies with --vex-out"),
        (["--vex-out", "{out}/v.json", "--vex-format", "spdx"], "'spdx' is not one of"),
    ],
)
def test_vex_usage_errors(
    toolkit_root: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    args = [a.replace("{out}", str(tmp_path)) for a in extra]
    code, output = _scan(toolkit_root, tmp_path, *args)
    assert code == 2 and message in output
    assert not (tmp_path / "v.json").exists() and not (tmp_path / "report.json").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not_json: not JSON"),
        (b'{"hello": "world"}', "unknown_format"),
    ],
)
def test_an_unusable_advisory_stops_the_scan(
    toolkit_root: Path, tmp_path: Path, content: bytes, message: str
) -> None:
    bad = tmp_path / "feed" / "bad.json"
    bad.parent.mkdir()
    bad.write_bytes(content)
    vex = tmp_path / "v.json"
    code, output = _scan(
        toolkit_root, tmp_path, "--vex-out", str(vex), *_advisories([*BULLETINS, bad.parent])
    )
    assert code == 2 and f"--advisories: {bad}: {message}" in output
    assert not vex.exists() and not (tmp_path / "report.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    code, output = _scan(toolkit_root, tmp_path, "--vex-out", str(vex), *_advisories([empty]))
    assert code == 2 and "no advisory document under" in output
    code, output = _scan(
        toolkit_root, tmp_path, "--vex-out", str(vex), *_advisories([tmp_path / "missing.json"])
    )
    assert code == 2 and "missing.json: unreadable" in output


def test_a_hosts_own_config_decides_its_vex_statement(tmp_path: Path) -> None:
    """CVE-2024-0132 (2024/5582, "does not impact use cases where CDI is used"): the host's
    Container Toolkit 1.16.1 in CDI mode is not affected, its condition the evidence; the same
    host without a config is affected, the condition named as not evaluated."""
    from tests.scanner.node import nodetree as nt

    root = tmp_path / "node"
    nt.write(root, "/etc/hostname", "ctk-node\n")
    elf.build_tool(root / "usr/bin", "nvidia-container-cli", ["cli-version: 1.16.1"])
    config = nt.write(
        root,
        "/etc/nvidia-container-runtime/config.toml",
        nt.TOOLKIT_CONFIG.replace('mode = "auto"', 'mode = "cdi"'),
    )
    vex = tmp_path / "cdi.openvex.json"
    args = ["scan", str(root), "-f", "json", "-o", str(tmp_path / "r.json"), "--no-cache", "-q"]
    feed = _advisories([PSIRT / "2024/5582"])
    assert invoke([*args, "--vex-out", str(vex), *feed]).exit_code == 0
    by = {s["vulnerability"]["name"]: s for s in json.loads(vex.read_text())["statements"]}
    assert by["CVE-2024-0132"]["status"] == "not_affected"
    assert by["CVE-2024-0132"]["justification"] == "vulnerable_code_not_in_execute_path"
    assert "decided by the asset's facts: cdi_mode = true" in by["CVE-2024-0132"]["status_notes"]
    config.unlink()
    unknown = tmp_path / "unknown.openvex.json"
    assert invoke([*args, "--vex-out", str(unknown), *feed]).exit_code == 0
    by = {s["vulnerability"]["name"]: s for s in json.loads(unknown.read_text())["statements"]}
    assert by["CVE-2024-0132"]["status"] == "affected"
    assert "conditions not evaluated: cdi_mode" in by["CVE-2024-0132"]["status_notes"]
