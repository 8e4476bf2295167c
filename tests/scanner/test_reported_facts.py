"""What is reported is what is there (issue 7, section 2): a file named like a GPU library that
is no ELF shared library, or that cannot be read, is reported once, as a finding of its own
kind, with the same facts in the table, the JSON and the CycloneDX."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scanner.bom.cyclonedx import to_json as bom_json
from scanner.detect import analyze_elf
from scanner.errors import DetectError, NotElfError
from scanner.model import ScanResult
from scanner.pipeline import ScanOptions, run_scan
from scanner.report import render_table, to_dict
from tests.fixtures import elf
from tests.fixtures import images as im
from tests.scanner import scenarios as sc

PASSWD = b"root:x:0:0:root:/root:/bin/bash\n"
LIB = "/usr/lib/x86_64-linux-gnu"


def build_root(base: Path) -> Path:
    """A root with one real library and three impostors named like GPU libraries: a link to
    /etc/passwd, a relocatable object (ELF, but no shared library) and a damaged library."""
    root = base / "root"
    lib = root / LIB.lstrip("/")
    lib.mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/passwd").write_bytes(PASSWD)
    elf.build_cuda_library(lib, "cudart", "12.4.127")
    (lib / "libcudart.so.12").symlink_to("libcudart.so.12.4.127")
    (lib / "libcudnn_evil.so").symlink_to("/etc/passwd")  # absolute: resolved inside the root
    obj = elf.build_cuda_library(base / "obj", "cublas", "12.4.5.8")
    elf.patch_elf64_header(obj, e_type=1)  # ET_REL: an object file, not a shared library
    shutil.copyfile(obj, lib / "libcublas.so.12")
    good = elf.build_cudnn_library(base / "cudnn", "cudnn_graph", (9, 1, 0))
    elf.truncated_copy(good, lib / "libcudnn_graph.so.9", 200)
    return root


def as_image(root: Path, base: Path) -> str:
    image = im.Image([im.Layer(sc.members_of(root))])
    return im.write_image(base / "image", image, "oci")


def files_and_findings(result: ScanResult) -> dict[str, Any]:
    """The facts every format must agree on, from the JSON report."""
    doc = to_dict(result)
    return {
        "libraries": sorted(lib["ref"]["path"] for lib in doc["libraries"]),
        "findings": sorted((f["kind"], tuple(f["paths"])) for f in doc["findings"]),
    }


def bom_facts(result: ScanResult) -> dict[str, Any]:
    bom = json.loads(bom_json(result))
    files = sorted(c["name"] for c in bom.get("components", []) if c["type"] == "file")
    props = [p["value"] for p in bom["metadata"].get("properties", [])]
    return {"files": files, "findings": sorted(v for v in props if ":" in v)}


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ScanResult]:
    base = tmp_path_factory.mktemp("impostors")
    root = build_root(base)
    options = ScanOptions(use_cache=False, workers=1)
    return {
        "host": run_scan(str(root), options),
        "image": run_scan(as_image(root, base), options),
    }


@pytest.mark.parametrize("kind", ["host", "image"])
def test_impostors_are_findings_not_libraries(scans: dict[str, ScanResult], kind: str) -> None:
    result = scans[kind]
    facts = files_and_findings(result)
    # The damaged ELF library is still a library (name, digest, verdict) with its error.
    assert facts["libraries"] == [f"{LIB}/libcudart.so.12.4.127", f"{LIB}/libcudnn_graph.so.9"]
    damaged = next(lib for lib in result.libraries if lib.ref.path.endswith("graph.so.9"))
    assert damaged.error is not None and "truncated" in damaged.error
    not_elf = {f.paths: f.message for f in result.findings if f.kind == "not-elf"}
    assert sorted(not_elf) == [
        ("/etc/passwd", f"{LIB}/libcudnn_evil.so"),
        (f"{LIB}/libcublas.so.12",),
    ]
    passwd = not_elf[("/etc/passwd", f"{LIB}/libcudnn_evil.so")]
    assert hashlib.sha256(PASSWD).hexdigest() in passwd  # path and sha256, as the issue asks
    assert "not an ELF file" in passwd
    assert "ELF type ET_REL" in not_elf[(f"{LIB}/libcublas.so.12",)]
    # Reported once: nothing of it is also "skipped".
    reported = {"/etc/passwd", f"{LIB}/libcublas.so.12", f"{LIB}/libcudnn_graph.so.9"}
    assert not [s for s in result.skipped if s.path in reported]


@pytest.mark.parametrize("kind", ["host", "image"])
def test_every_format_reports_the_same_files_and_findings(
    scans: dict[str, ScanResult], kind: str
) -> None:
    result = scans[kind]
    facts = files_and_findings(result)
    bom = bom_facts(result)
    assert bom["files"] == facts["libraries"]
    assert sorted(v.split(":", 1)[0] for v in bom["findings"]) == sorted(
        k for k, _ in facts["findings"]
    )
    for f in result.findings:
        assert f"{f.kind}: {f.message}" in bom["findings"]
    damaged = next(
        c for c in json.loads(bom_json(result))["components"] if c["name"].endswith("graph.so.9")
    )
    assert any(p["name"] == "gpuprov:file:error" for p in damaged["properties"])
    wide = _table(result, wide=True)
    narrow = _table(result, wide=False)  # each directory named once, on a row of its own
    for path in facts["libraries"]:
        assert path in wide
        directory, name = path.rsplit("/", 1)
        assert directory in narrow and name in narrow
    for k, paths in facts["findings"]:
        assert k in wide and paths[0] in wide
        assert k in narrow


def _table(result: ScanResult, *, wide: bool) -> str:
    import io

    out = io.StringIO()
    render_table(result, out, color=False, wide=wide)
    return " ".join(out.getvalue().split())


# -- an unreadable library: the same facts in every format, through the real CLI --------------


def _gpuprov(args: list[str]) -> subprocess.CompletedProcess[str]:
    """The real CLI. As root (whom file modes do not stop) it runs with every capability
    dropped (setpriv), so a mode-000 file is as unreadable to it as to any other user."""
    exe = Path(sys.executable).with_name("gpuprov")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gpuprov"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "running as root needs setpriv (util-linux) to drop capabilities"
        cmd = [setpriv, "--bounding-set=-all", "--inh-caps=-all", *cmd]
    done = subprocess.run(cmd + args, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_unreadable_library_is_the_same_finding_in_every_format(tmp_path: Path) -> None:
    root = tmp_path / "root"
    lib = root / LIB.lstrip("/")
    lib.mkdir(parents=True)
    elf.build_cuda_library(lib, "cudart", "12.4.127")
    locked = elf.build_cudnn_library(lib, "cudnn_graph", (9, 1, 0))
    locked.chmod(0)
    locked_path = f"{LIB}/{locked.name}"
    outputs = {}
    for fmt in ("json", "cyclonedx", "table"):
        out = tmp_path / f"report.{fmt}"
        done = _gpuprov(["scan", str(root), "-f", fmt, "-o", str(out), "--no-cache", "-q"])
        assert done.returncode == 0, done.stderr
        outputs[fmt] = out.read_text()
    doc = json.loads(outputs["json"])
    assert [x["ref"]["path"] for x in doc["libraries"]] == [f"{LIB}/libcudart.so.12.4.127"]
    (finding,) = [f for f in doc["findings"] if f["kind"] == "unreadable"]
    assert finding["paths"] == [locked_path]
    assert "Permission denied" in finding["message"]
    assert not [f for f in doc["findings"] if locked_path in f["paths"] and f is not finding]
    assert not [s for s in doc["skipped"] if s["path"] == locked_path]
    bom = json.loads(outputs["cyclonedx"])
    assert [c["name"] for c in bom["components"] if c["type"] == "file"] == [
        f"{LIB}/libcudart.so.12.4.127"
    ]
    props = [p["value"] for p in bom["metadata"]["properties"]]
    assert f"unreadable: {finding['message']}" in props
    table = " ".join(outputs["table"].split())
    assert "unreadable" in table and locked_path in table
    # ... and a gate can fail on it
    done = _gpuprov(
        ["scan", str(root), "-f", "json", "--no-cache", "-q", "--fail-on", "unreadable"]
    )
    assert done.returncode == 1 and f"fail-on unreadable: {locked_path}" in done.stderr
    # ... and, unowned and unread, it still fails --fail-on unowned (fail safe)
    assert finding["also"] == ["unowned"]
    done = _gpuprov(["scan", str(root), "-f", "json", "--no-cache", "-q", "--fail-on", "unowned"])
    assert done.returncode == 1 and f"fail-on unreadable: {locked_path}" in done.stderr


def test_fail_on_not_elf(scans: dict[str, ScanResult], tmp_path: Path) -> None:
    root = build_root(tmp_path)
    done = _gpuprov(["scan", str(root), "-f", "json", "--no-cache", "-q", "--fail-on", "not-elf"])
    assert done.returncode == 1
    assert f"fail-on not-elf: {LIB}/libcublas.so.12" in done.stderr
    assert "fail-on not-elf: /etc/passwd" in done.stderr


@pytest.mark.parametrize(("e_type", "name"), [(1, "ET_REL"), (2, "ET_EXEC"), (4, "ET_CORE")])
def test_elf_files_that_are_no_shared_object_are_not_libraries(
    tmp_path: Path, e_type: int, name: str
) -> None:
    lib = elf.build_cuda_library(tmp_path, "cudart", "12.4.127")
    elf.patch_elf64_header(lib, e_type=e_type)
    with pytest.raises(NotElfError, match=f"not a shared library: ELF type {name}"):
        analyze_elf(str(lib))


def test_a_damaged_elf_library_is_no_not_elf(tmp_path: Path) -> None:
    lib = elf.build_cuda_library(tmp_path, "cudart", "12.4.127")
    cut = elf.truncated_copy(lib, tmp_path / "cut.so", 200)
    with pytest.raises(DetectError) as raised:
        analyze_elf(str(cut))
    assert not isinstance(raised.value, NotElfError)


def test_sparse_image_entry_is_one_unreadable_finding(tmp_path: Path) -> None:
    """A candidate whose content an image does not carry in a readable form (an old GNU
    sparse entry) is reported once, with that reason, not as a library nor as skipped."""
    import tarfile

    header = bytearray(tarfile.TarInfo("usr/lib/libcudnn.so.9").tobuf(tarfile.USTAR_FORMAT))
    header = header[:512]
    header[156:157] = b"S"
    header[124:136] = b"%011o\0" % 512
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    tar = bytes(header) + b"s" * 512 + bytes(1024)
    target = im.write_image(tmp_path / "img", im.Image([im.Layer(tar=tar)]), "oci")
    result = run_scan(target, ScanOptions(use_cache=False, workers=1))
    assert result.libraries == ()
    (finding,) = result.findings
    assert finding.kind == "unreadable" and finding.paths == ("/usr/lib/libcudnn.so.9",)
    assert "sparse tar entry" in finding.message
    assert not [s for s in result.skipped if s.path == "/usr/lib/libcudnn.so.9"]


def test_a_packaged_library_replaced_by_garbage_still_fails_modified(tmp_path: Path) -> None:
    """Fail safe: a file that is no library keeps its integrity verdict for ``--fail-on``
    (a packaged libcudnn overwritten with text is ``not-elf`` *and* matches ``modified``)."""
    from tests.fixtures import packages as pk

    root = tmp_path / "root"
    root.mkdir()
    good = elf.build_cudnn_library(tmp_path / "lib", "cudnn_graph", (9, 1, 0)).read_bytes()
    spec = pk.DebSpec(
        "libcudnn9-cuda-12", "9.1.0.70-1", files={"/usr/lib/libcudnn_graph.so.9": good}
    )
    pk.dpkg_install(root, [spec], tmp_path / "debs")
    (root / "usr/lib/libcudnn_graph.so.9").write_bytes(b"#!/bin/sh\necho hi\n")
    result = run_scan(str(root), ScanOptions(use_cache=False, workers=1))
    (finding,) = result.findings
    assert finding.kind == "not-elf" and finding.also == ("modified",)
    assert "integrity modified" in finding.message
    done = _gpuprov(["scan", str(root), "-f", "json", "--no-cache", "-q", "--fail-on", "modified"])
    assert done.returncode == 1, done.stderr
    assert "fail-on not-elf: /usr/lib/libcudnn_graph.so.9" in done.stderr
