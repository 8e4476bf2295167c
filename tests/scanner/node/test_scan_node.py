"""A host scan of a GPU node root: driver, GPUs, CDI injection and L4T in the result and the
CycloneDX BOM (valid against 1.6), the legacy list, and an aarch64 Jetson root."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from scanner.bom.cyclonedx import to_json, validate_json
from scanner.errors import UsageError
from scanner.node.inputs import NodeInputs
from scanner.pipeline import ScanOptions, run_scan
from tests.fixtures import elf
from tests.scanner.node import nodetree as nt


def _scan(root: Path, tmp_path: Path, **node: Any) -> Any:
    return run_scan(str(root), ScanOptions(cache_dir=tmp_path / "cache", node=NodeInputs(**node)))


def _props(component: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in component.get("properties", []):
        out.setdefault(p["name"], []).append(p["value"])
    return out


def test_gpu_node_facts_and_bom(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    result = _scan(root, tmp_path)
    node = result.node
    assert node is not None
    assert node.driver is not None
    assert node.driver.version == nt.DRIVER and node.driver.flavor == "proprietary"
    assert node.driver.libcuda == (nt.DRIVER,) and node.driver.nvml == (nt.DRIVER,)
    assert node.driver.cuda_max == "12.2"
    assert node.notes == ()
    assert [g.bus_id for g in node.gpus] == ["0000:17:00.0", "0000:2a:00.0"]
    by_path = {i.host_path: i for i in node.injected}
    libcuda = by_path[f"{nt.LIB}/libcuda.so.{nt.DRIVER}"]
    lib = next(lib for lib in result.libraries if lib.ident.family == "libcuda")
    # the injected libcuda is the very file the scan hashed
    assert libcuda.digests == lib.digests
    assert (libcuda.family, libcuda.version) == ("libcuda", nt.DRIVER)
    assert libcuda.devices == ("nvidia.com/gpu=*",)
    smi = by_path["/usr/bin/nvidia-smi"]
    assert smi.digests is not None and smi.digests.size == len(b"\x7fELF stand-in nvidia-smi")
    socket = by_path["/run/nvidia-persistenced/socket"]
    assert socket.digests is None and socket.error == "not found in the root"

    document = to_json(result)
    assert validate_json(document, "1.6") is None
    doc = json.loads(document)
    asset = _props(doc["metadata"]["component"])
    assert asset["gpuprov:driver:version"] == [nt.DRIVER]
    assert asset["gpuprov:driver:cuda-max"] == ["12.2"]
    assert asset["gpuprov:gpu:count"] == ["2"]
    assert "/dev/nvidiactl" in asset["gpuprov:injected:device-node"]
    assert f"{nt.LIB}/libcuda.so -> libcuda.so.1" in asset["gpuprov:injected:link"]
    devices = [c for c in doc["components"] if c["type"] == "device"]
    assert [d["name"] for d in devices] == ["NVIDIA H100 80GB HBM3"] * 2
    assert _props(devices[0])["gpuprov:gpu:compute-capability"] == ["9.0"]
    injected = {c["name"]: c for c in doc["components"] if c["bom-ref"].startswith("injected:")}
    assert injected[f"{nt.LIB}/libcuda.so.{nt.DRIVER}"]["hashes"][0]["content"] == (
        lib.digests.sha256
    )
    assert "hashes" not in injected["/run/nvidia-persistenced/socket"]
    deps = {d["ref"]: d.get("dependsOn", []) for d in doc["dependencies"]}
    assert {d["bom-ref"] for d in devices} <= set(deps["asset"])
    assert validate_json(to_json(result, "1.7"), "1.7") is None


def test_nvidia_smi_file_and_mismatch(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    # the module was upgraded in place, the old user-space libraries are still installed
    nt.write(root, "/proc/driver/nvidia/version", nt.PROC_VERSION.replace(nt.DRIVER, "535.161.07"))
    nt.write(root, "/sys/module/nvidia/version", "535.161.07\n")
    smi = nt.write(tmp_path, "/smi.xml", nt.NVIDIA_SMI_XML.replace(nt.DRIVER, "535.161.07"))
    node = _scan(root, tmp_path, nvidia_smi_xml=str(smi)).node
    assert node.driver.version == "535.161.07"
    assert node.driver.cuda_max_source == "nvidia-smi -q -x (smi.xml)"
    assert [n.split(":")[0] for n in node.notes] == ["driver-mismatch"]


def test_legacy_list_and_driver_root(tmp_path: Path) -> None:
    # the GPU Operator's driver container: the driver files live under /run/nvidia/driver
    root = tmp_path / "root"
    nt.write(root, "/etc/hostname", "operator-node\n")
    nt.write(root, "/sys/module/nvidia/version", "550.54.15\n")
    drv = "/run/nvidia/driver"
    elf.build_driver_library(root / f"{drv}{nt.LIB}".lstrip("/"), "cuda", "550.54.15")
    nt.write(root, "/var/run/cdi/nvidia.json", nt.as_json_spec(nt.cdi_spec("550.54.15", root=drv)))
    listing = nt.write(tmp_path, "/list.txt", nt.container_cli_list("550.54.15"))
    node = _scan(root, tmp_path, container_cli_list=str(listing)).node
    assert node.driver.version == "550.54.15" and node.driver.cuda_max == "12.4"
    by_path = {i.host_path: i for i in node.injected}
    op = by_path[f"{drv}{nt.LIB}/libcuda.so.550.54.15"]
    assert op.container_paths == (f"{nt.LIB}/libcuda.so.550.54.15",)
    assert op.sources == ("cdi:/var/run/cdi/nvidia.json",) and op.digests is not None
    legacy = by_path[f"{nt.LIB}/libcuda.so.550.54.15"]
    assert legacy.sources == ("nvidia-container-cli list",) and legacy.container_paths == ()


def test_bad_inputs(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    nt.write(root, "/etc/cdi/broken.yaml", "cdiVersion: 0.5.0\nkind: gpu\n")
    node = _scan(root, tmp_path).node
    assert any(n.startswith("cdi: /etc/cdi/broken.yaml: kind") for n in node.notes)
    with pytest.raises(UsageError, match="cannot read nvidia-smi"):
        _scan(root, tmp_path, nvidia_smi_xml=str(tmp_path / "missing.xml"))
    bad = nt.write(tmp_path, "/bad.txt", "hello world\n")
    with pytest.raises(UsageError, match="not nvidia-container-cli list output"):
        _scan(root, tmp_path, container_cli_list=str(bad))
    assert _scan(root, tmp_path, enabled=False).node is None


def test_plain_root_has_no_node_facts(tmp_path: Path) -> None:
    root = tmp_path / "root"
    nt.write(root, "/etc/hostname", "plain\n")
    assert _scan(root, tmp_path).node is None


def test_jetson_root_with_aarch64_libraries(tmp_path: Path) -> None:
    root = tmp_path / "root"
    nt.write(root, "/etc/nv_tegra_release", nt.TEGRA_RELEASE_36)
    nt.write(
        root,
        "/var/lib/dpkg/status",
        nt.dpkg_status([("nvidia-l4t-core", "36.4.0-20240912212859", "arm64")]),
    )
    tegra = root / "usr/lib/aarch64-linux-gnu/nvidia"
    elf.build_driver_library(tegra, "cuda", "36.4.0", filename="libcuda.so.1.1", arch="aarch64")
    cuda = root / "usr/local/cuda-12.6/targets/aarch64-linux/lib"
    elf.build_cuda_library(cuda, "cudart", "12.6.68", arch="aarch64")
    elf.build_cuda_library(cuda, "cublas", "12.6.1.4", arch="aarch64")
    result = _scan(root, tmp_path)
    arch = {lib.ident.family: lib.ident.arch for lib in result.libraries}
    assert arch == {"libcuda": "aarch64", "cudart": "aarch64", "cublas": "aarch64"}
    versions = {lib.ident.family: lib.ident.version for lib in result.libraries}
    assert versions["cudart"] == "12.6.68" and versions["cublas"] == "12.6.1.4"
    node = result.node
    assert node.l4t is not None
    assert (node.l4t.release, node.l4t.jetpack, node.l4t.cuda) == ("36.4.0", "6.1", "12.6")
    assert node.driver is not None and node.driver.version is None
    assert node.driver.cuda_max == "12.6" and node.driver.cuda_max_source == "JetPack 6.1"
    doc = json.loads(to_json(result))
    asset = _props(doc["metadata"]["component"])
    assert asset["gpuprov:l4t:release"] == ["36.4.0"]
    assert asset["gpuprov:jetpack:release"] == ["6.1"]
    assert validate_json(json.dumps(doc), "1.6") is None


def test_hostile_node_inputs_stay_in_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    nt.write(root, "/etc/hostname", "hostile\n")
    outside = nt.write(tmp_path, "/outside/secret", "the machine's own file\n")
    # a CDI spec names a host path whose link points out of the root, and one through ..
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.1").symlink_to(str(outside))
    (lib / "libnvidia-ml.so.1").symlink_to("../../../../outside/secret")
    nt.write(root, "/outside/secret", "the root's own file\n")
    spec = (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n  mounts:\n"
        f"  - hostPath: {nt.LIB}/libcuda.so.1\n    containerPath: /x/libcuda.so.1\n"
        f"  - hostPath: {nt.LIB}/libnvidia-ml.so.1\n    containerPath: /x/libnvidia-ml.so.1\n"
        "  - hostPath: /../../outside/secret\n    containerPath: /x/secret\n"
        "devices:\n- name: all\n  containerEdits: {}\n"
    )
    nt.write(root, "/etc/cdi/nvidia.yaml", spec)
    # a FIFO where a version file should be must not block the scan
    (root / "proc/driver/nvidia").mkdir(parents=True)
    os.mkfifo(root / "proc/driver/nvidia/version")
    node = _scan(root, tmp_path).node
    digests = {i.host_path: i.digests for i in node.injected}
    inside = hashlib.sha256(b"the root's own file\n").hexdigest()
    assert digests[f"{nt.LIB}/libcuda.so.1"] is None  # /outside/secret is absent in the root
    assert digests[f"{nt.LIB}/libnvidia-ml.so.1"].sha256 == inside
    assert digests["/../../outside/secret"].sha256 == inside
    assert node.driver is None


def test_entity_expansion_in_nvidia_smi_xml_is_refused(tmp_path: Path) -> None:
    laughs = (
        '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY a "aaaaaaaaaa">\n'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">\n' for i in range(9))
        + "]>\n<nvidia_smi_log><driver_version>&j;</driver_version></nvidia_smi_log>\n"
    )
    root = nt.gpu_node(tmp_path / "root")
    smi = nt.write(tmp_path, "/laughs.xml", laughs)
    node = _scan(root, tmp_path, nvidia_smi_xml=str(smi)).node
    assert node.driver.version == nt.DRIVER  # the module's, never the expanded text
    assert any(n.startswith("nvidia-smi: ") for n in node.notes)


def test_injected_digests_are_cached_by_file_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = nt.gpu_node(tmp_path / "root")
    smi = "/usr/bin/nvidia-smi"
    first = {i.host_path: i.digests for i in _scan(root, tmp_path).node.injected}
    import scanner.node.reader as reader

    hashed: list[str] = []
    real = reader.hash_file
    monkeypatch.setattr(reader, "hash_file", lambda p, **kw: hashed.append(p) or real(p, **kw))
    again = {i.host_path: i.digests for i in _scan(root, tmp_path).node.injected}
    assert again == first and hashed == []  # nothing re-read
    nt.write(root, smi, b"\x7fELF replaced nvidia-smi")  # same size, new bytes
    changed = {i.host_path: i.digests for i in _scan(root, tmp_path).node.injected}
    assert hashed == [str(root / smi.lstrip("/"))]
    assert changed[smi] != first[smi]
    nocache = run_scan(str(root), ScanOptions(use_cache=False)).node
    assert {i.host_path: i.digests for i in nocache.injected}[smi] == changed[smi]


def test_jetson_debs_name_the_l4t_libcuda(tmp_path: Path) -> None:
    # Jetson Linux 35.4.1 (JetPack 5.1.2) as its real packages install it: nvidia-l4t-core and
    # nvidia-l4t-cuda, whose libcuda.so.1.1 (aarch64) lies in the tegra directory
    from tests.fixtures import packages as pk

    root = tmp_path / "root"
    root.mkdir()
    libcuda = elf.build_driver_library(
        tmp_path / "build",
        "cuda",
        "35.4.1",
        filename="libcuda.so.1.1",
        embed=False,
        arch="aarch64",
    ).read_bytes()
    version = "35.4.1-20230801124926"
    tegra = "/usr/lib/aarch64-linux-gnu/tegra"
    pk.dpkg_install(
        root,
        [
            pk.DebSpec(
                "nvidia-l4t-core",
                version,
                arch="arm64",
                files={
                    "/etc/nv_tegra_release": (
                        b"# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, "
                        b"EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023\n"
                    )
                },
            ),
            pk.DebSpec(
                "nvidia-l4t-cuda",
                version,
                arch="arm64",
                files={f"{tegra}/libcuda.so.1.1": libcuda},
                symlinks={f"{tegra}/libcuda.so": "libcuda.so.1.1"},
            ),
        ],
        tmp_path / "debs",
    )
    result = _scan(root, tmp_path)
    [lib] = [lib for lib in result.libraries if lib.ident.family == "libcuda"]
    assert (lib.ident.version, lib.ident.arch, lib.integrity.value) == (
        "35.4.1",
        "aarch64",
        "verified",
    )
    node = result.node
    assert node.l4t is not None
    assert (node.l4t.release, node.l4t.jetpack, node.l4t.board) == ("35.4.1", "5.1.2", "t186ref")
    assert node.driver.libcuda == ("35.4.1",) and node.driver.version is None
    assert node.driver.cuda_max == "11.4" and node.notes == ()
