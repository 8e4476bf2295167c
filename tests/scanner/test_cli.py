"""`gpuprov scan` end to end: formats, --output, --spec-version, --fail-on, caches, --include,
usage errors, and every bad input of issue 2 section 7 (clear message naming the file and the
reason, the scan continues where it safely can, documented exit code, never a traceback).

Most runs are in-process with typer's CliRunner (each on a watchdog thread, so a hang fails
the test instead of stalling the suite); a few run the real console entry point in a
subprocess with a timeout.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpuprov.cli import app
from scanner.bom.cyclonedx import validate_json
from scanner.source import _IMAGE_TRANSPORTS, _STORE_TRANSPORTS, TARGET_FORMS
from tests.fixtures import elf
from tests.fixtures import images as im
from tests.fixtures import packages as pk
from tests.scanner import scenarios as sc

TIMEOUT = 120  # seconds; generous for a loaded CI machine, far from a hang


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "acceptance-world")


@pytest.fixture(scope="session")
def graph_lib(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("cli-libs")
    return elf.build_cudnn_library(out, "cudnn_graph", (9, 1, 0)).read_bytes()


def invoke(args: Sequence[str], timeout: float = TIMEOUT) -> Result:
    """Run ``gpuprov ARGS`` in-process; fail (not hang) past ``timeout``; never a traceback."""
    box: list[Result] = []
    worker = threading.Thread(
        target=lambda: box.append(CliRunner().invoke(app, list(args))), daemon=True
    )
    worker.start()
    worker.join(timeout)
    assert box, f"gpuprov {' '.join(args)} did not finish within {timeout} s"
    result = box[0]
    # Anything but SystemExit escaping the command is a traceback for a real user.
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    assert "Traceback" not in result.output
    return result


def plain(text: str) -> str:
    """Output with rich's error-box borders removed and whitespace collapsed (boxes wrap)."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def run_real(args: Sequence[str], timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a subprocess (what a user's shell runs)."""
    exe = Path(sys.executable).with_name("gpuprov")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gpuprov"]
    done = subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=timeout, cwd=Path.cwd()
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def libraries(stdout: str) -> dict[str, dict[str, Any]]:
    """--format json output: library dicts by path."""
    return {lib["ref"]["path"]: lib for lib in json.loads(stdout)["libraries"]}


def as_expected(lib: dict[str, Any]) -> sc.Expected:
    return sc.Expected(
        path=lib["ref"]["path"],
        aliases=tuple(sorted(lib["aliases"])),
        sha256=lib["digests"]["sha256"],
        owner=lib["owner"]["purl"] if lib["owner"] else None,
        family=lib["ident"]["family"],
        component=lib["ident"]["component"],
        version=lib["ident"]["version"] or "",
        cuda_major=lib["ident"]["cuda_major"],
        integrity=lib["integrity"],
        layer=lib["ref"]["layer"],
    )


# --- formats -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["oci-archive", "docker-archive"])
def test_json_reports_every_library_exactly(world: sc.World, fmt: str) -> None:
    target, built = world.image_target(fmt)
    result = invoke(["scan", target, "--format", "json", "--no-cache", "--quiet"])
    assert result.exit_code == 0, result.output
    got = {p: as_expected(lib) for p, lib in libraries(result.stdout).items()}
    assert got == world.expected_for_image(built)
    doc = json.loads(result.stdout)
    assert doc["asset"]["kind"] == "image" and doc["asset"]["layers"] == built.layer_digests
    assert [s["path"] for s in doc["skipped"]] == [
        f"{sc.APP}/libcudnn_cnn.so",
        f"{sc.APP}/libcudnn_cnn.so.9",
    ]
    assert result.stderr == ""  # --quiet: not even the skipped items


def test_default_format_off_a_terminal_is_cyclonedx(world: sc.World) -> None:
    target, built = world.image_target("oci")
    result = invoke(["scan", target, "--no-cache"])
    assert result.exit_code == 0
    assert validate_json(result.stdout, "1.6") is None
    doc = json.loads(result.stdout)
    assert doc["specVersion"] == "1.6"
    assert doc["metadata"]["component"]["version"] == built.manifest_digest
    # skipped items are named on stderr when the report goes to stdout as a document
    assert f"skipped: source: {sc.APP}/libcudnn_cnn.so: symlink loop" in result.stderr


def test_spec_version_17(world: sc.World) -> None:
    result = invoke(
        ["scan", str(world.root), "-f", "cyclonedx", "--spec-version", "1.7", "--no-cache"]
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["specVersion"] == "1.7"
    assert validate_json(result.stdout, "1.7") is None


def test_table(world: sc.World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = invoke(["scan", str(world.root), "--format", "table", "--no-cache"])
    assert result.exit_code == 0
    out = result.stdout
    assert f"host {sc.HOSTNAME}" in out
    for exp in world.expected.values():
        assert exp.path.rsplit("/", 1)[1] in out
        assert exp.sha256[:12] in out
    for word in ("verified", "modified", "unowned", "finding mixed", "2 item(s) skipped"):
        assert word in out
    assert "\x1b[" not in out  # no colour codes off a terminal


# --- --output ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "cyclonedx", "table"])
def test_output_replaces_the_file_atomically(world: sc.World, tmp_path: Path, fmt: str) -> None:
    target, _ = world.image_target("oci")
    out = tmp_path / "report.out"
    out.write_text("old report\n")
    keep = tmp_path / "old-link"
    os.link(out, keep)  # an in-place rewrite would change this link's content too
    inode = out.stat().st_ino
    result = invoke(["scan", target, "-f", fmt, "-o", str(out), "--no-cache", "-q"])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert keep.read_text() == "old report\n"
    assert out.stat().st_ino != inode  # written beside, then renamed over
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old-link", "report.out"]
    text = out.read_text()
    if fmt == "cyclonedx":
        assert validate_json(text, "1.6") is None
    elif fmt == "json":
        assert set(libraries(text)) == set(world.expected)
    else:
        assert "libcudnn_graph.so.9" in text and "verified" in text


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_unwritable_output_is_a_clear_error(world: sc.World, tmp_path: Path, fmt: str) -> None:
    target, _ = world.image_target("oci")
    out = tmp_path / "missing-dir" / "report.json"
    result = invoke(["scan", target, "-f", fmt, "-o", str(out), "--no-cache", "-q"])
    assert result.exit_code == 2
    assert f"error: cannot write {out}" in result.stderr
    assert not (tmp_path / "missing-dir").exists()


# --- --fail-on -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kinds", "named"),
    [
        ("modified", [f"{sc.MULTIARCH}/libcudnn_ops.so.9.1.0"]),
        ("unowned", [f"{sc.APP}/libcudart.so.12", f"{sc.MIXED}/libcudnn_ops.so.9"]),
        ("mixed", [f"{sc.MIXED}/libcudnn_graph.so.9", f"{sc.MIXED}/libcudnn_ops.so.9"]),
        ("modified,unowned,mixed", [f"{sc.SITE}/nvidia/cublas/lib/libcublasLt.so.12"]),
    ],
)
def test_fail_on_matches_exit_1(world: sc.World, kinds: str, named: list[str]) -> None:
    target, _ = world.image_target("docker25")
    result = invoke(["scan", target, "-f", "json", "--fail-on", kinds, "--no-cache", "-q"])
    assert result.exit_code == 1
    assert libraries(result.stdout)  # the report is still written
    lines = [line for line in result.stderr.splitlines() if line.startswith("fail-on ")]
    assert sorted({line.split()[1].rstrip(":") for line in lines}) == sorted(kinds.split(","))
    for path in named:
        assert path in result.stderr


def test_fail_on_without_a_match_exits_0(world: sc.World, tmp_path: Path) -> None:
    # no-record is not in the world; a clean pip-installed tree has none of the others
    target, _ = world.image_target("oci")
    assert invoke(["scan", target, "--fail-on", "no-record", "--no-cache"]).exit_code == 0
    root = tmp_path / "clean"
    graph = (world.root / sc.MULTIARCH[1:] / "libcudnn_graph.so.9.1.0").read_bytes()
    files = {"nvidia/cudnn/lib/libcudnn_graph.so.9": graph}
    wheel = pk.build_wheel(tmp_path, "nvidia-cudnn-cu12", "9.1.0.70", files)
    pk.pip_install(root / "usr/lib/python3/site-packages", [wheel])
    result = invoke(
        [
            "scan",
            str(root),
            "-f",
            "json",
            "--no-cache",
            "--fail-on",
            "modified,unowned,mixed,no-record",
        ]
    )
    assert result.exit_code == 0, result.stderr
    (lib,) = libraries(result.stdout).values()
    assert lib["integrity"] == "verified" and lib["ident"]["version"] == "9.1.0.70"


# --- usage errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail-on", "modified,bogus"], "bogus"),
        (["--spec-version", "1.5"], "'1.5' is not one of '1.6', '1.7'"),
        (["--format", "xml"], "xml"),
        (["--max-size", "lots"], "not a size"),
        (["--no-such-option"], "no-such-option"),
        (["--platform", "linux/arm64"], "--platform only applies to image targets"),
    ],
)
def test_usage_errors_exit_2(world: sc.World, args: list[str], message: str) -> None:
    result = invoke(["scan", str(world.root), "--no-cache", *args])
    assert result.exit_code == 2
    assert message in plain(result.output)


def test_target_usage_errors_exit_2(world: sc.World, tmp_path: Path) -> None:
    target, _ = world.image_target("oci")
    cases = [
        ([], "missing argument 'target'"),
        ([target, "--include", "/usr"], "--include only applies to host directory targets"),
        ([str(tmp_path / "nope")], f"{tmp_path / 'nope'}: no such file or directory"),
        (["bogus:thing"], "unsupported target type 'bogus'"),
        ([f"oci:{world.root}"], "not an OCI image layout"),
        ([f"{target.rsplit(':', 1)[0]}:no-such-tag"], "no image tagged 'no-such-tag'"),
    ]
    for args, message in cases:
        result = invoke(["scan", *args, "--no-cache"])
        assert result.exit_code == 2, args
        assert message.lower() in plain(result.output).lower(), (args, result.output)


def test_version_and_help() -> None:
    result = invoke(["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("gpuprov ")
    result = invoke(["scan", "--help"])
    assert result.exit_code == 0 and "--fail-on" in result.stdout
    # the target's help names every transport parse_target takes (it once left out three)
    text = re.sub(r"-\s+", "-", " ".join(result.stdout.split()))
    for transport in (*_IMAGE_TRANSPORTS, *_STORE_TRANSPORTS, "registry"):
        assert f"{transport}:" in TARGET_FORMS and f" {transport}:" in text, transport


# --- caches and --include --------------------------------------------------------------------


def _stats(result: Result) -> dict[str, float]:
    stats: dict[str, float] = json.loads(result.stdout)["stats"]
    return stats


def test_cache_dir_second_image_reads_only_new_layers(world: sc.World, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target, _ = world.image_target("oci-archive")
    common = ["-f", "json", "-q", "--cache-dir", str(cache)]
    first = invoke(["scan", target, *common])
    assert _stats(first)["layers_read"] == 3
    assert any(cache.rglob("*"))

    layers = list(world.image.layers)
    app_layer = im.Layer([*layers[2].members, im.file("opt/app/NOTES", "v2\n")])
    other = im.Image([layers[0], layers[1], app_layer], env=world.image.env)
    other_target = im.write_image(tmp_path / "v2", other, "oci")
    second = invoke(["scan", other_target, *common])
    assert _stats(second)["layers_read"] == 1 and _stats(second)["layers_cached"] == 2
    assert libraries(second.stdout).keys() == libraries(first.stdout).keys()

    listing = sorted(str(p) for p in cache.rglob("*"))
    uncached = invoke(["scan", other_target, "-f", "json", "-q", "--no-cache"])
    assert _stats(uncached)["layers_read"] == 3
    assert sorted(str(p) for p in cache.rglob("*")) == listing
    same = invoke(["scan", other_target, *common])
    assert _stats(same)["layers_read"] == 0
    for path, lib in libraries(same.stdout).items():
        assert as_expected(lib) == as_expected(libraries(uncached.stdout)[path])


def test_host_include(world: sc.World, tmp_path: Path) -> None:
    args = ["scan", str(world.root), "-f", "json", "--cache-dir", str(tmp_path / "c")]
    result = invoke([*args, "--include", sc.MIXED, "--include", sc.CONDA])
    assert result.exit_code == 0
    got = {p: as_expected(lib) for p, lib in libraries(result.stdout).items()}
    included = {p: e for p, e in world.expected.items() if p.startswith((sc.MIXED, sc.CONDA))}
    assert got == included
    # the subtree's package database (conda-meta) is inside it: ownership is kept
    assert got[f"{sc.CONDA}/lib/libcurand.so.{sc.CURAND_VERSION}"].integrity == "verified"
    # dpkg's database lies outside the subtree: the walk still reads it (the pipeline hands the
    # package databases to the source), so the packaged libraries keep owner and verdict
    packaged = invoke([*args, "--include", sc.MULTIARCH])
    assert packaged.exit_code == 0
    got = {p: as_expected(lib) for p, lib in libraries(packaged.stdout).items()}
    # (links from outside the subtree are not walked: aliases aside, every field as expected)
    want = {p: e for p, e in world.expected.items() if p.startswith(sc.MULTIARCH + "/")}
    assert {p: replace(e, aliases=()) for p, e in got.items()} == {
        p: replace(e, aliases=()) for p, e in want.items()
    }
    assert {e.integrity for e in got.values()} >= {"verified", "modified"}
    # one missing subtree among others is a skipped item; all missing scanned nothing: exit 2
    partly = invoke([*args, "--include", sc.MIXED, "--include", "/no/such/dir"])
    assert partly.exit_code == 0
    assert set(libraries(partly.stdout)) == {p for p in world.expected if p.startswith(sc.MIXED)}
    assert "/no/such/dir: include path not found" in partly.stderr
    missing = invoke([*args, "--include", "/no/such/dir", "--include", "/usr/lbi"])
    assert missing.exit_code == 2
    assert missing.stdout == ""
    assert missing.stderr.strip().endswith(
        f"gpuprov: error: --include: /no/such/dir, /usr/lbi: not found inside {world.root}; "
        "nothing was scanned"
    )


# --- bad input (issue 2, section 7) ---------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """One bad input: how the CLI must answer it."""

    target: str
    exit_code: int
    messages: tuple[str, ...]  # each must appear on stderr (file and reason)
    reported: tuple[str, ...] = ()  # libraries still reported (the scan continued)
    options: tuple[str, ...] = ()  # extra command-line options
    note: str = ""  # a case-specific value checked in the test


def _truncated_layer(base: Path, lib: bytes) -> Bad:
    tar = im.layer_tar([im.file("usr/lib/libcudart.so.12", lib), im.file("big", os.urandom(9000))])
    broken = gzip.compress(tar)[:-300]
    image = im.Image(
        [im.Layer([im.file("usr/lib/libcudnn_graph.so.9", lib)]), im.Layer(blob=broken)]
    )
    target = im.write_image(base, image, "oci")
    return Bad(
        target,
        0,
        (f"skipped: source: {im.sha256(broken)}: layer is damaged", "truncated"),
        ("/usr/lib/libcudnn_graph.so.9", "/usr/lib/libcudart.so.12"),
    )


def _corrupt_layer(base: Path, lib: bytes) -> Bad:
    blob = bytearray(gzip.compress(im.layer_tar([im.file("data", os.urandom(30000))])))
    blob[40:60] = b"\xff" * 20
    image = im.Image(
        [im.Layer([im.file("usr/lib/libcudnn_graph.so.9", lib)]), im.Layer(blob=bytes(blob))]
    )
    target = im.write_image(base, image, "docker25")
    return Bad(
        target,
        0,
        ("layer is damaged", "gzip data is corrupt"),
        ("/usr/lib/libcudnn_graph.so.9",),
        note=im.sha256(bytes(blob)),
    )


def _escaping_names(base: Path, lib: bytes) -> Bad:
    escape = f"gpuprov-escape-{uuid.uuid4().hex}"
    layer = im.Layer(
        [
            im.file(f"../../../../../../../../tmp/{escape}/libcudnn_graph.so.9", lib),
            im.file("/usr/lib/libcudart.so.12", lib),
        ]
    )
    target = im.write_image(base, im.Image([layer]), "oci-archive")
    return Bad(
        target,
        0,
        (
            f"skipped: source: /tmp/{escape}/libcudnn_graph.so.9: tar entry "
            f"'../../../../../../../../tmp/{escape}/libcudnn_graph.so.9'",
            "climbs above the root",
            "skipped: source: /usr/lib/libcudart.so.12: tar entry '/usr/lib/libcudart.so.12'",
            "is absolute",
        ),
        (f"/tmp/{escape}/libcudnn_graph.so.9", "/usr/lib/libcudart.so.12"),
        note=escape,
    )


def _symlink_loop(base: Path, lib: bytes) -> Bad:
    layer = im.Layer(
        [
            im.symlink("usr/lib/libcudnn.so.9", "libcudnn.so"),
            im.symlink("usr/lib/libcudnn.so", "/usr/lib/libcudnn.so.9"),
            im.file("usr/lib/libcudnn_graph.so.9", lib),
        ]
    )
    target = im.write_image(base, im.Image([layer]), "docker-archive")
    return Bad(
        target,
        0,
        (
            "skipped: source: /usr/lib/libcudnn.so: symlink loop",
            "skipped: source: /usr/lib/libcudnn.so.9: symlink loop",
        ),
        ("/usr/lib/libcudnn_graph.so.9",),
    )


def _bomb(base: Path, lib: bytes) -> Bad:
    # 80 MiB of zeros in a few KiB: past the ratio cap plus its 64 MiB slack
    layer = im.Layer([im.file("usr/lib/libcudnn.so.9", bytes(80 << 20))], compression="zstd")
    target = im.write_image(base, im.Image([layer]), "oci")
    return Bad(
        target,
        2,
        (f"error: layer {im.sha256(layer.stored())}: expands more than 10 times", "bomb"),
        options=("--max-ratio", "10"),
    )


def _bomb_total(base: Path, lib: bytes) -> Bad:
    layer = im.Layer([im.file("usr/lib/libcudnn.so.9", bytes(4 << 20))], compression="gzip")
    target = im.write_image(base, im.Image([layer]), "oci-archive")
    return Bad(
        target,
        2,
        (f"error: layer {im.sha256(layer.stored())}: image expands to more than 1048576 bytes",),
        options=("--max-size", "1M"),
    )


def _not_elf(base: Path, lib: bytes) -> Bad:
    root = base / "root"
    (root / "usr/lib").mkdir(parents=True)
    (root / "usr/lib/libcudnn_graph.so.9").write_bytes(b"#!/bin/sh\necho not a library\n")
    (root / "usr/lib/libcudnn_ops.so.9").write_bytes(lib[:200])
    (root / "usr/lib/libcudart.so.12").write_bytes(b"")
    (root / "usr/lib/libcudnn_cnn.so.9").write_bytes(lib)
    # Files that are no ELF shared library are `not-elf` findings (issue 7), not libraries;
    # a truncated ELF library is still listed, with its digest, name and error.
    return Bad(
        str(root),
        1,
        (
            "fail-on not-elf: /usr/lib/libcudart.so.12",
            "fail-on not-elf: /usr/lib/libcudnn_graph.so.9",
        ),
        ("/usr/lib/libcudnn_ops.so.9", "/usr/lib/libcudnn_cnn.so.9"),
        ("--fail-on", "not-elf"),
    )


def _corrupt_dpkg(base: Path, lib: bytes) -> Bad:
    root = base / "root"
    root.mkdir()
    spec = pk.DebSpec(
        "libcudnn9-cuda-12", "9.1.0.70-1", files={"/usr/lib/libcudnn_graph.so.9": lib}
    )
    pk.dpkg_install(root, [spec], base)
    pk.append_dpkg_status(root, b"\nPackage: broken\x00\x01\nVersion\n: nothing\n\n")
    return Bad(
        str(root),
        0,
        ("skipped: catalog: /var/lib/dpkg/status: corrupt dpkg stanza at line",),
        ("/usr/lib/libcudnn_graph.so.9",),
    )


def _corrupt_rpmdb(base: Path, lib: bytes) -> Bad:
    root = base / "root"
    (root / "var/lib/rpm").mkdir(parents=True)
    (root / "var/lib/rpm/rpmdb.sqlite").write_bytes(b"SQLite format 3\x00" + os.urandom(4080))
    (root / "usr/lib64").mkdir(parents=True)
    (root / "usr/lib64/libcudnn_graph.so.9").write_bytes(lib)
    return Bad(
        str(root),
        0,
        ("skipped: catalog: /var/lib/rpm/rpmdb.sqlite: unreadable rpm sqlite database",),
        ("/usr/lib64/libcudnn_graph.so.9",),
    )


def _truncated_archive(base: Path, lib: bytes) -> Bad:
    image = im.Image([im.Layer([im.file("usr/lib/libcudnn_graph.so.9", lib)])])
    im.write_oci_archive(base / "full.tar", image, "1")
    data = (base / "full.tar").read_bytes()
    (base / "cut.tar").write_bytes(data[: len(data) // 2])
    return Bad(str(base / "cut.tar"), 2, (f"error: {base / 'cut.tar'}: not a readable tar",))


def _not_an_image(base: Path, lib: bytes) -> Bad:
    (base / "garbage.tar").write_bytes(b"this is not a tar archive\n" * 100)
    return Bad(
        f"docker-archive:{base / 'garbage.tar'}", 2, (f"error: {base / 'garbage.tar'}: not a",)
    )


BAD_INPUTS = {
    "truncated-layer": _truncated_layer,
    "corrupt-layer": _corrupt_layer,
    "escaping-tar-names": _escaping_names,
    "symlink-loop": _symlink_loop,
    "decompression-bomb-ratio": _bomb,
    "decompression-bomb-total": _bomb_total,
    "not-elf-and-truncated-libraries": _not_elf,
    "corrupt-dpkg-status": _corrupt_dpkg,
    "corrupt-rpmdb": _corrupt_rpmdb,
    "truncated-archive": _truncated_archive,
    "not-an-image": _not_an_image,
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input(case: str, tmp_path: Path, graph_lib: bytes) -> None:
    bad = BAD_INPUTS[case](tmp_path, graph_lib)
    result = invoke(["scan", bad.target, "-f", "json", "--no-cache", *bad.options])
    assert result.exit_code == bad.exit_code, result.output
    for message in bad.messages:
        assert message in result.stderr, (message, result.stderr)
    if bad.exit_code == 2:
        assert result.stdout == ""  # no half report
        return
    doc = json.loads(result.stdout)
    got = {lib["ref"]["path"]: lib for lib in doc["libraries"]}
    assert sorted(got) == sorted(bad.reported)
    for lib in got.values():
        assert len(lib["digests"]["sha256"]) == 64
    # the report lists what was skipped, exactly as stderr named it
    for s in doc["skipped"]:
        assert f"skipped: {s['stage']}: {s['path']}: {s['reason']}" in result.stderr
    assert doc["skipped"] or case == "not-elf-and-truncated-libraries"
    if case == "escaping-tar-names":
        assert not Path("/tmp", bad.note).exists()  # nothing was written outside
    if case == "corrupt-dpkg-status":
        # the damaged stanza is skipped; the good one still owns and verifies the library
        (lib,) = got.values()
        assert lib["integrity"] == "verified" and lib["owner"]["name"] == "libcudnn9-cuda-12"
    if case == "corrupt-layer":
        assert bad.note in result.stderr  # the layer is named by its digest
    if case == "not-elf-and-truncated-libraries":
        # a good library beside damaged ones is still fully identified
        assert got["/usr/lib/libcudnn_cnn.so.9"]["ident"]["version"] == "9.1.0.70"
        assert "truncated ELF" in got["/usr/lib/libcudnn_ops.so.9"]["error"]
        not_elf = {f["paths"][0]: f["message"] for f in doc["findings"] if f["kind"] == "not-elf"}
        assert sorted(not_elf) == ["/usr/lib/libcudart.so.12", "/usr/lib/libcudnn_graph.so.9"]
        assert "empty file" in not_elf["/usr/lib/libcudart.so.12"]


# --- the real entry point -------------------------------------------------------------------


def test_real_process_scan_writes_a_valid_report(world: sc.World, tmp_path: Path) -> None:
    target, built = world.image_target("docker-archive")
    out = tmp_path / "bom.json"
    done = run_real(
        ["scan", target, "-f", "cyclonedx", "-o", str(out), "--fail-on", "modified", "--no-cache"]
    )
    assert done.returncode == 1
    assert f"fail-on modified: {sc.MULTIARCH}/libcudnn_ops.so.9.1.0" in done.stderr
    assert validate_json(out.read_text(), "1.6") is None
    files = [c for c in json.loads(out.read_text())["components"] if c["type"] == "file"]
    assert sorted(c["name"] for c in files) == sorted(world.expected)


def test_real_process_bad_input(tmp_path: Path, graph_lib: bytes) -> None:
    bad = _bomb(tmp_path, graph_lib)
    done = run_real(["scan", bad.target, "--no-cache", *bad.options])
    assert done.returncode == 2
    assert done.stdout == ""
    for message in bad.messages:
        assert message in done.stderr
    done = run_real(["scan", str(tmp_path / "nowhere")])
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"gpuprov: error: {tmp_path / 'nowhere'}: no such file or directory"
    )


def test_a_directory_name_of_any_bytes_in_every_format(graph_lib: bytes, tmp_path: Path) -> None:
    """A directory named with an undecodable byte, an escape sequence, a newline, U+2028, a space,
    "#" and "%": every format written, none a traceback (CycloneDX raised UnicodeEncodeError
    quoting the undecodable byte into a bom-ref), the table printable, the JSON exact."""
    odd = b"d\xff\x1b[2J\n=x\xe2\x80\xa8 #%"
    lib_dir = os.path.join(os.fsencode(tmp_path), b"root", b"opt", odd)
    os.makedirs(lib_dir)
    with open(os.path.join(lib_dir, b"libcudnn_graph.so.9.1.0"), "wb") as f:
        f.write(graph_lib)
    root = tmp_path / "root"
    path = "/opt/" + os.fsdecode(odd) + "/libcudnn_graph.so.9.1.0"
    out = {}
    for fmt in ("table", "json", "cyclonedx"):
        target = tmp_path / f"out.{fmt}"
        result = invoke(["scan", str(root), "-f", fmt, "-o", str(target), "--no-cache"])
        assert result.exit_code in (0, 1), result.output
        out[fmt] = target.read_bytes().decode()
    assert not [c for c in out["table"] if c != "\n" and (ord(c) < 0x20 or c == "\x7f")]
    assert "d\\udcff\\x1b[2J\\n=x\\u2028" in out["table"]
    assert [lib["ref"]["path"] for lib in json.loads(out["json"])["libraries"]] == [path]
    assert validate_json(out["cyclonedx"], "1.6") is None
    refs = re.findall(r'"bom-ref": "file:([^"#]*)"', out["cyclonedx"])
    assert refs == ["/opt/d%FF%1B%5B2J%0A%3Dx%E2%80%A8%20%23%25/libcudnn_graph.so.9.1.0"]
