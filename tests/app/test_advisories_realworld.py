"""NVIDIA's real bytes against NVIDIA's real bulletins (realworld group, issue 19 "How it will
be checked"), on SQLite and PostgreSQL.

Roots that look installed (dpkg status, ``info/<pkg>.list`` and ``.md5sums`` from each package's
own control archive) are built from Debian 12's non-free packages (tests/fixtures/debian.py:
downloaded once, SHA-256 checked against Debian's index) and from NVIDIA's cuDNN wheel:

- ``gpu-535-261``: libcuda1 + libnvidia-ml1 535.261.03-1 (bookworm);
- ``gpu-535-309``: libcuda1 + libnvidia-ml1 535.309.01-0+deb12u1 (bookworm-security);
- ``cuda-toolkit-118``: libcudart11.0, libnvjpeg11 (nvJPEG 11.9.0.86) and nvidia-cuda-toolkit
  11.8.89~11.8.0-5~deb12u1 (nvcc, ptxas, cuobjdump, nvdisasm, compute-sanitizer);
- ``cuda-runtime-118``: libcudart11.0 + libnvjpeg11 only (no tool binary);
- ``cudnn-only``: the nvidia-cudnn-cu11 9.8.0.87 wheel (cuDNN 9.8.0);
- ``nvjpeg-copy``: the real libnvjpeg.so.11.9.0.86 copied as ``/opt/app/lib/libnvjpeg.so.11``,
  owned by nothing (how applications bundle it): no version of its own, its build paths
  name toolkit r11.8.

Each root is scanned (`run_scan`), pushed, the 131 shared bulletins are imported, and each
asset's status for specific CVEs is compared with what the bulletins say for those exact
versions. The bulletin texts quoted in the tests are NVIDIA's CVE Record ``versions`` strings
(shared/fixtures/nvidia-psirt/YEAR/BULLETIN/CVE-*.json), which keep the platform and branch
("Linux(R535)") that the CSAF product slugs flatten.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli_advisories import import_paths
from gpuprov.cli import app as cli
from scanner.advisories.document import DEFAULT_MAX_BYTES
from scanner.bom.cyclonedx import to_json, validate_json
from scanner.model import Integrity, ScanResult
from scanner.node.inputs import NodeInputs
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.fixtures import debian as deb
from tests.fixtures import images as im
from tests.fixtures import packages as pk
from tests.scanner import scenarios as sc
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.node import nodetree as nt
from tests.scanner.test_realworld import CACHE, SITE, _pip

pytestmark = pytest.mark.realworld

CUDNN_WHEEL = "nvidia_cudnn_cu11-9.8.0.87-py3-none-manylinux_2_27_x86_64.whl"
#: PyPI's digest of that file (https://pypi.org/pypi/nvidia-cudnn-cu11/json, 2026-12-07)
CUDNN_SHA256 = "11aa6d2d6bb3aaa0ce15d06557c729c79b9ecae05679538ef2afc47b8d02bce9"
DRIVER_DIR = "/usr/lib/x86_64-linux-gnu/nvidia/current"
MULTIARCH = "/usr/lib/x86_64-linux-gnu"

ROOTS: dict[str, tuple[deb.Deb, ...]] = {
    "gpu-535-261": (deb.LIBCUDA_535_261, deb.LIBNVML_535_261),
    "gpu-535-309": (deb.LIBCUDA_535_309, deb.LIBNVML_535_309),
    "cuda-toolkit-118": (deb.LIBCUDART_118, deb.LIBNVJPEG_118, deb.TOOLKIT_118),
    "cuda-runtime-118": (deb.LIBCUDART_118, deb.LIBNVJPEG_118),
}


@dataclass(frozen=True)
class Scanned:
    root: Path
    result: ScanResult
    bom: bytes


def _cudnn_wheel() -> Path:
    wheel = CACHE / CUDNN_WHEEL
    if not wheel.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        done = _pip(
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux_2_27_x86_64",
            "--python-version",
            "3.11",
            "nvidia-cudnn-cu11==9.8.0.87",
            "-d",
            str(CACHE),
        )
        if done.returncode != 0:
            pytest.fail(f"cannot download nvidia-cudnn-cu11: {done.stderr.strip()[-300:]}")
    digest = hashlib.sha256()
    with wheel.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == CUDNN_SHA256, f"{wheel}: not PyPI's file"
    return wheel


def _identify(root: Path, name: str, n: int) -> None:
    (root / "etc/machine-id").write_text(f"{n:x}" * 32 + "\n")
    (root / "etc/hostname").write_text(name + "\n")


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scanned]:
    """Every root built and scanned once for both backends."""
    base = tmp_path_factory.mktemp("advisories-realworld")
    roots: dict[str, Path] = {}
    for n, (name, debs) in enumerate(ROOTS.items(), start=1):
        roots[name] = deb.installed_root(base / name, *debs)
        _identify(roots[name], name, n)
    cudnn = base / "cudnn-only"
    pk.write_os_release(cudnn, "debian", "12")
    done = _pip(
        "install", "--no-deps", "--no-index", "--target", str(cudnn / SITE[1:]), str(_cudnn_wheel())
    )
    assert done.returncode == 0, done.stderr
    _identify(cudnn, "cudnn-only", 15)
    roots["cudnn-only"] = cudnn
    copy = base / "nvjpeg-copy"
    pk.write_os_release(copy, "debian", "12")
    (copy / "opt/app/lib").mkdir(parents=True)
    real = roots["cuda-runtime-118"] / MULTIARCH[1:] / "libnvjpeg.so.11.9.0.86"
    (copy / "opt/app/lib/libnvjpeg.so.11").write_bytes(real.read_bytes())
    _identify(copy, "nvjpeg-copy", 14)
    roots["nvjpeg-copy"] = copy
    out = {}
    for name, root in roots.items():
        node = NodeInputs()
        if name.startswith("gpu-"):
            # the driver hosts are bare metal, as their saved `nvidia-smi -q -x` says: the
            # driver is judged on the datacenter lines (without it, the vGPU guest line's
            # anomalies decide some R535 answers: tests/scanner/advisories/test_match.py)
            version = ROOTS[name][0].filename.split("_")[1].split("-")[0]  # 535.261.03
            smi = base / f"{name}.smi.xml"
            smi.write_text(nt.nvidia_smi_xml("None").replace(nt.DRIVER, version))
            node = NodeInputs(nvidia_smi_xml=str(smi))
        result = run_scan(str(root), ScanOptions(use_cache=False, node=node))
        out[name] = Scanned(root, result, to_json(result).encode())
    return out


@pytest.fixture
def statuses(
    service: Service, post_report: Callable[..., Any], scanned: dict[str, Scanned]
) -> Iterator[Callable[[str, str], list[dict[str, Any]]]]:
    """The service with every root pushed and the shared bulletins imported: a function of
    (asset name, CVE) giving that asset's findings for the CVE."""
    for item in scanned.values():
        response = post_report(item.bom)
        assert response.status_code in (200, 201), response.text
    summary = import_paths(service.db, [PSIRT], strict=False, max_bytes=DEFAULT_MAX_BYTES)
    assert summary.refused == [] and summary.imported == 131
    reader = auth(service.token("inventory:read"))
    assets = service.client.get("/api/v1/assets", headers=reader, params={"limit": 100}).json()
    ids = {a["name"]: a["id"] for a in assets["items"]}
    assert sorted(ids) == sorted(scanned)
    pages: dict[str, dict[str, Any]] = {}
    for name, asset_id in ids.items():
        page = service.client.get(
            f"/api/v1/assets/{asset_id}/vulnerabilities", headers=reader, params={"limit": 1000}
        )
        assert page.status_code == 200, page.text
        pages[name] = page.json()
        assert pages[name]["total"] == len(pages[name]["items"])  # nothing beyond the page

    def answer(asset: str, cve: str) -> list[dict[str, Any]]:
        return [i for i in pages[asset]["items"] if i["cve"] == cve]

    answer.pages = pages  # type: ignore[attr-defined]
    yield answer


# -- the scans themselves ----------------------------------------------------------------------


def test_real_packages_scan_as_installed(scanned: dict[str, Scanned]) -> None:
    """Every NVIDIA library is found at Debian's path, verified against the package's own
    md5sums (the wheel's RECORD for cuDNN), with the versions the packages state."""
    for name, item in scanned.items():
        libs = item.result.libraries
        assert libs, name
        want = Integrity.UNOWNED if name == "nvjpeg-copy" else Integrity.VERIFIED
        for lib in libs:
            assert lib.integrity is want, (name, lib.ref.path, lib.integrity_reason)
        assert validate_json(item.bom.decode()) is None, name
    driver = {lib.ident.family: lib for lib in scanned["gpu-535-261"].result.libraries}
    assert driver["libcuda"].ref.path == f"{DRIVER_DIR}/libcuda.so.535.261.03"
    assert driver["libcuda"].ident.version == "535.261.03"
    assert driver["nvidia-ml"].ident.version == "535.261.03"
    runtime = {lib.ident.family: lib for lib in scanned["cuda-runtime-118"].result.libraries}
    assert (runtime["cudart"].ident.version, runtime["cudart"].ident.cuda_major) == ("11.8.89", 11)
    assert runtime["nvjpeg"].ref.path == f"{MULTIARCH}/libnvjpeg.so.11.9.0.86"
    assert runtime["nvjpeg"].ident.version == "11.9.0.86"
    cudnn = scanned["cudnn-only"].result.libraries
    assert {lib.ident.family for lib in cudnn} >= {"cudnn"}
    # the wheel's version, verified by its RECORD
    assert {lib.ident.version for lib in cudnn if lib.ident.family == "cudnn"} == {"9.8.0.87"}


def _products(result: ScanResult) -> dict[str, tuple[str | None, str | None, str | None]]:
    return {p.key: (p.version, p.toolkit, p.branch) for p in result.products}


def test_products_the_bulletins_name(scanned: dict[str, Scanned]) -> None:
    """The driver with its branch (from the real libcuda/NVML), the toolkit release from
    Debian's "11.9.0.86~11.8.0-5~deb12u1" form, the tools by their real banners, nvJPEG by its
    real file; nothing for cuDNN (no bulletin names it)."""
    assert _products(scanned["gpu-535-261"].result) == {"driver": ("535.261.03", None, "R535")}
    assert _products(scanned["gpu-535-309"].result) == {"driver": ("535.309.01", None, "R535")}
    assert _products(scanned["cuda-toolkit-118"].result) == {
        "cuda-toolkit": ("11.8.0", None, None),
        "nvcc": ("11.8.89", "11.8.0", None),
        "ptxas": ("11.8.89", "11.8.0", None),
        "cuobjdump": ("11.8.86", "11.8.0", None),
        "nvdisasm": ("11.8.86", "11.8.0", None),
        "compute-sanitizer": (None, "11.8.0", None),
        "nvjpeg": ("11.9.0.86", "11.8.0", None),
    }
    # nvJPEG alone still belongs to CUDA 11.8: its package says so, whatever table there is
    assert _products(scanned["cuda-runtime-118"].result) == {
        "nvjpeg": ("11.9.0.86", "11.8.0", None)
    }
    assert scanned["cudnn-only"].result.products == ()
    (copy,) = scanned["nvjpeg-copy"].result.products
    assert (copy.key, copy.version, copy.toolkit, copy.line) == ("nvjpeg", None, None, "11.8")
    tools = {p.key: p for p in scanned["cuda-toolkit-118"].result.products}
    # Debian's /usr/bin/nvcc is a launcher script for the real binary: one nvcc
    assert tools["nvcc"].paths == ("/usr/lib/nvidia-cuda-toolkit/bin/nvcc", "/usr/bin/nvcc")
    assert tools["cuobjdump"].paths == ("/usr/bin/cuobjdump",)
    assert any(
        e.source == "Cuda compilation tools, release 11.8, V11.8.86"
        for e in tools["cuobjdump"].evidence
    )


def test_runtime_root_as_an_image(scanned: dict[str, Scanned], tmp_path: Path) -> None:
    """The runtime root as an OCI image (two layers: the OS, then the packages): the same
    products and libraries as the host scan, nvJPEG still of CUDA 11.8.0."""
    root = scanned["cuda-runtime-118"].root
    base = im.Layer(sc.members_of(root, lambda p: p.startswith("/etc")), compression="gzip")
    rest = im.Layer(sc.members_of(root, lambda p: not p.startswith("/etc")), compression="zstd")
    target = im.write_image(tmp_path, im.Image([base, rest]), "oci", tag="runtime")
    result = run_scan(target, ScanOptions(use_cache=False))
    assert _products(result) == _products(scanned["cuda-runtime-118"].result)
    host = {
        (lib.ref.path, lib.digests.sha256) for lib in scanned["cuda-runtime-118"].result.libraries
    }
    assert {(lib.ref.path, lib.digests.sha256) for lib in result.libraries} == host
    assert all(lib.integrity is Integrity.VERIFIED for lib in result.libraries)


def _scan_table(root: Path) -> str:
    done = CliRunner().invoke(cli, ["scan", "--format", "table", str(root)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    return done.output


def test_cli_lists_the_products(scanned: dict[str, Scanned]) -> None:
    """`gpuprov scan DIR` on the real roots names each product a bulletin may name."""
    table = _scan_table(scanned["cuda-toolkit-118"].root)
    for line in (
        "product: NVIDIA CUDA Toolkit 11.8.0",
        "product: cuobjdump (CUDA Toolkit) 11.8.86 (toolkit 11.8.0) at /usr/bin/cuobjdump",
        "product: nvdisasm (CUDA Toolkit) 11.8.86 (toolkit 11.8.0) at /usr/bin/nvdisasm",
        "product: nvcc (CUDA Toolkit) 11.8.89 (toolkit 11.8.0) at "
        "/usr/lib/nvidia-cuda-toolkit/bin/nvcc, /usr/bin/nvcc",
        f"product: nvJPEG 11.9.0.86 (toolkit 11.8.0) at {MULTIARCH}/libnvjpeg.so.11.9.0.86",
    ):
        assert line in table.splitlines(), table
    assert "version unknown (toolkit 11.8.0) at /usr/bin/compute-sanitizer" in table
    driver = _scan_table(scanned["gpu-535-261"].root)
    assert "product: NVIDIA GPU Display Driver 535.261.03 (branch R535) at " in driver
    assert f"{DRIVER_DIR}/libcuda.so.535.261.03" in driver
    assert "product:" not in _scan_table(scanned["cudnn-only"].root)


# -- the driver: branch-aware and OS-aware -----------------------------------------------------


def _one(found: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(found) == 1, found
    return found[0]


def _driver_statuses_match_the_bulletins(statuses: Callable[[str, str], Any]) -> None:
    """CVE-2025-23280 (2025/5703): "Linux(R535) All driver versions prior to 535.274.02" (also
    "Linux(R570) ... prior to 570.195.03", "Linux(R580) ... prior to 580.95.05"): 535.261.03 is
    affected; 535.309.01 is fixed, although it is below both other branches' fixes.

    CVE-2025-23286 (2025/5670): "Linux(R535) All driver versions prior to 535.261.03": the fix
    itself, 535.261.03, is fixed (the boundary).

    CVE-2025-23309 (2025/5703): "Windows(R535) All driver versions prior to 539.56" and only
    Windows: no finding at all for a Linux driver, whatever 535 < 539 says.

    CVE-2024-0091 (2024/5551): the GPU display driver rows fix R550 and R555 only; R535 appears
    only as a vGPU guest driver ("Guest driver Linux(R535) 535.161.08 (All versions up to and
    including vGPU 16.5)"), a product line of its own. R535 is older than the branches listed
    and no R535 fix exists: affected, marked inferred, on both hosts.
    """
    old, new = "gpu-535-261", "gpu-535-309"
    f = _one(statuses(old, "CVE-2025-23280"))
    assert (f["status"], f["installed"], f["fixed_in"], f["bulletin"]) == (
        "affected",
        "535.261.03",
        "535.274.02",
        "5703",
    )
    assert f["affected_text"] == "All driver versions prior to 535.274.02"
    assert f["inferred"] is False and f["review"] is None
    assert f"{DRIVER_DIR}/libcuda.so.535.261.03" in f["evidence"]["paths"]
    assert f["evidence"]["branch"] == "R535"
    assert f["evidence"]["package"].startswith("pkg:deb/debian/libcuda1@535.261.03-1")
    f = _one(statuses(new, "CVE-2025-23280"))
    assert (f["status"], f["installed"], f["fixed_in"]) == ("fixed", "535.309.01", "535.274.02")

    for host in (old, new):
        f = _one(statuses(host, "CVE-2025-23286"))
        assert (f["status"], f["fixed_in"]) == ("fixed", "535.261.03")
        assert statuses(host, "CVE-2025-23309") == []
        f = _one(statuses(host, "CVE-2024-0091"))
        assert (f["status"], f["inferred"]) == ("affected", True)
        assert f["evidence"]["branches_listed"] == ["R550", "R555"]


_LINUX_R535 = re.compile(r"^All driver versions prior to (?P<fix>535\.\d+\.\d+)$")
_DRIVER_LINES = {"GeForce", "NVIDIA RTX, Quadro, NVS", "Tesla"}


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _r535_fixes() -> dict[str, str]:
    """CVE -> its Linux R535 driver fix, read from NVIDIA's CVE Records directly (the texts the
    service parses from the CSAF documents: an independent reading)."""
    fixes: dict[str, str] = {}
    for path in sorted(PSIRT.glob("*/*/CVE-*.json")):
        cna = json.loads(path.read_text())["containers"]["cna"]
        for affected in cna.get("affected", []):
            if affected.get("product") not in _DRIVER_LINES:
                continue
            if affected.get("platforms") != ["Linux(R535)"]:
                continue
            for v in affected.get("versions", []):
                m = _LINUX_R535.match(v.get("version", ""))
                if m:
                    cve = cna.get("cveMetadata", {}).get("cveId") or path.stem
                    assert fixes.setdefault(cve, m["fix"]) == m["fix"], cve
    return fixes


def _every_r535_linux_fix_is_honoured(statuses: Callable[[str, str], Any]) -> None:
    """Every CVE whose CVE Record gives a Linux R535 GPU driver fix ("Linux(R535) All driver
    versions prior to X" for GeForce, NVIDIA RTX/Quadro/NVS or Tesla): each host is affected
    exactly when its version is below X, else fixed."""
    fixes = _r535_fixes()
    # 2023/5468 (535.54.03) through 2025/5703 (535.274.02): 20 CVEs in the shared bulletins
    assert len(fixes) == 20 and fixes["CVE-2025-23280"] == "535.274.02", fixes
    wrong = []
    for host, version in (("gpu-535-261", "535.261.03"), ("gpu-535-309", "535.309.01")):
        for cve, fix in sorted(fixes.items()):
            want = "affected" if _vkey(version) < _vkey(fix) else "fixed"
            got = [(f["status"], f["fixed_in"]) for f in statuses(host, cve)]
            if got != [(want, fix)]:
                wrong.append((host, cve, fix, want, got))
    assert wrong == []


def _hosts_carry_only_driver_findings(statuses: Callable[[str, str], Any]) -> None:
    """A driver host holds no CUDA Toolkit part: no toolkit finding, and no finding is left
    for review or under investigation by the R535 texts."""
    pages = statuses.pages  # type: ignore[attr-defined]
    for host in ("gpu-535-261", "gpu-535-309"):
        items = pages[host]["items"]
        assert items and {i["product"] for i in items} == {"driver"}
        assert [i["cve"] for i in items if i["review"]] == []
        assert {i["status"] for i in items} <= {"affected", "fixed", "not_affected"}
    affected = {
        host: {i["cve"] for i in pages[host]["items"] if i["status"] == "affected"}
        for host in ("gpu-535-261", "gpu-535-309")
    }
    # the security update fixes a strict subset: what it leaves are the inferred ones (no
    # R535 fix published)
    assert affected["gpu-535-309"] < affected["gpu-535-261"]
    inferred = {
        i["cve"]
        for i in pages["gpu-535-309"]["items"]
        if i["inferred"] and i["status"] == "affected"
    }
    assert affected["gpu-535-309"] == inferred and inferred


# -- the CUDA Toolkit: component-aware ---------------------------------------------------------


def _toolkit_statuses_match_the_bulletins(statuses: Callable[[str, str], Any]) -> None:
    """CVE-2023-0193 (2023/5446): "NVIDIA CUDA toolkit for Linux and Windows contains a
    vulnerability in cuobjdump", "All versions prior to 12.1": the toolkit root's real
    cuobjdump 11.8.86 (CUDA 11.8.0) is affected; the runtime root, holding cudart and nvJPEG
    but no cuobjdump, is not_affected / component_not_present.

    CVE-2022-34667 (2022/5373): cuobjdump, "All versions prior to 11.8": 11.8 is fixed.

    CVE-2024-0123 (2024/5577): "NVIDIA CUDA Toolkit for all platforms contains a vulnerability
    in nvdisasm", "All versions up to and including CUDA Toolkit 12.6U1": the real nvdisasm of
    11.8 is affected; the runtime root is not_affected / component_not_present.

    CVE-2025-23273 (2025/5661): "contains a vulnerability in nvJPEG", "All versions prior to
    CUDA Toolkit 13.0" (nvJPEG: "prior to nvJPEG 13.0.0"): nvJPEG 11.9.0.86 of CUDA 11.8 is
    affected in both roots, the runtime root's included (nvJPEG is there).

    CVE-2025-23272 (2025/5661): nvJPEG, "All versions prior to CUDA Toolkit 12.9 Update 1":
    affected in both roots.
    """
    tk, rt = "cuda-toolkit-118", "cuda-runtime-118"
    f = _one(statuses(tk, "CVE-2023-0193"))
    assert (f["status"], f["component"], f["fixed_in"], f["bulletin"]) == (
        "affected",
        "cuobjdump",
        "12.1",
        "5446",
    )
    assert f["evidence"]["paths"] == ["/usr/bin/cuobjdump"]
    assert f["evidence"]["compared_as"] == "11.8.0"
    f = _one(statuses(rt, "CVE-2023-0193"))
    assert (f["status"], f["justification"], f["component"]) == (
        "not_affected",
        "component_not_present",
        "cuobjdump",
    )
    assert f["evidence"]["toolkit_libraries"] == ["cudart", "nvjpeg"]

    f = _one(statuses(tk, "CVE-2022-34667"))
    assert (f["status"], f["fixed_in"]) == ("fixed", "11.8")

    f = _one(statuses(tk, "CVE-2024-0123"))
    assert (f["status"], f["component"]) == ("affected", "nvdisasm")
    assert f["evidence"]["paths"] == ["/usr/bin/nvdisasm"]
    f = _one(statuses(rt, "CVE-2024-0123"))
    assert (f["status"], f["justification"]) == ("not_affected", "component_not_present")

    for root in (tk, rt):
        for cve, fixed_in in (
            ("CVE-2025-23273", "CUDA Toolkit 13.0"),
            ("CVE-2025-23272", "CUDA Toolkit 12.9 Update 1"),
        ):
            f = _one(statuses(root, cve))
            assert (f["status"], f["component"], f["fixed_in"]) == (
                "affected",
                "nvjpeg",
                fixed_in,
            ), (root, cve)
            assert f["evidence"]["paths"] == [f"{MULTIARCH}/libnvjpeg.so.11.9.0.86"]
            assert f["evidence"]["version"] == "11.9.0.86"
            # the release comes from the package, not from a table of known releases
            assert f["evidence"]["toolkit_release"] == (
                "the toolkit install or package it belongs to"
            )
            assert f["review"] is None


def _runtime_root_is_component_aware(statuses: Callable[[str, str], Any]) -> None:
    """The runtime root's only affected findings are nvJPEG's: every cuobjdump and nvdisasm
    CVE is not_affected / component_not_present, and nothing goes to review."""
    items = statuses.pages["cuda-runtime-118"]["items"]  # type: ignore[attr-defined]
    affected = {i["component"] for i in items if i["status"] == "affected"}
    assert affected == {"nvjpeg"}
    others = [i for i in items if i["component"] != "nvjpeg"]
    assert others and all(
        (i["status"], i["justification"]) == ("not_affected", "component_not_present")
        for i in others
    )
    assert {c for i in others for c in i["component"].split(",")} == {"cuobjdump", "nvdisasm"}
    toolkit = statuses.pages["cuda-toolkit-118"]["items"]  # type: ignore[attr-defined]
    # the toolkit root: every CVE the runtime root is spared is decided on the real binaries
    assert {i["cve"] for i in others} <= {
        i["cve"] for i in toolkit if i["status"] != "not_affected"
    }
    assert all(i["review"] is None for i in [*items, *toolkit])
    assert {i["product"] for i in [*items, *toolkit]} == {"cuda-toolkit"}


def _nvjpeg_copy_is_judged_on_its_line(statuses: Callable[[str, str], Any]) -> None:
    """The unowned copy: CVE-2025-23273 ("prior to CUDA Toolkit 13.0") and CVE-2025-23272
    ("prior to CUDA Toolkit 12.9 Update 1") hold for every 11.8 update: affected, decided
    without review; a cuobjdump CVE (CVE-2023-0193): component_not_present."""
    for cve in ("CVE-2025-23273", "CVE-2025-23272"):
        f = _one(statuses("nvjpeg-copy", cve))
        assert (f["status"], f["installed"], f["review"]) == (
            "affected",
            "11.8 (update unknown)",
            None,
        )
        assert f["evidence"]["paths"] == ["/opt/app/lib/libnvjpeg.so.11"]
    f = _one(statuses("nvjpeg-copy", "CVE-2023-0193"))
    assert (f["status"], f["justification"]) == ("not_affected", "component_not_present")


def _cudnn_only_root_has_no_finding(statuses: Callable[[str, str], Any]) -> None:
    """No bulletin names cuDNN: NVIDIA's real cuDNN 9.8.0 libraries get no finding at all, and
    the answer names the feed consulted."""
    page = statuses.pages["cudnn-only"]  # type: ignore[attr-defined]
    assert page["items"] == [] and page["total"] == 0
    assert page["feed"]["documents"] == 131 and page["feed"]["imported_at"] is not None
    assert page["feed"]["matched_feed_imported_at"] == page["feed"]["imported_at"]


def test_statuses_match_the_bulletins(statuses: Callable[[str, str], Any]) -> None:
    """One import and one push of every root per backend (16 s), then each check in turn."""
    _driver_statuses_match_the_bulletins(statuses)
    _every_r535_linux_fix_is_honoured(statuses)
    _hosts_carry_only_driver_findings(statuses)
    _toolkit_statuses_match_the_bulletins(statuses)
    _runtime_root_is_component_aware(statuses)
    _nvjpeg_copy_is_judged_on_its_line(statuses)
    _cudnn_only_root_has_no_finding(statuses)
