"""Flags that decide a pass never pass silently (issue 7, section 1).

Repeatable options accumulate (``--fail-on a --fail-on b`` is ``--fail-on a,b``); a
``--fail-on`` kind that this scan cannot evaluate, or an option this scan would ignore, is a
usage error (exit 2) naming what is missing. Single-valued options given twice are refused for
every command in tests/app/test_cli.py.
"""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from gpuprov.cli import app
from tests.fixtures.elf import build_cudnn_library
from tests.fixtures.keys import generate, write_keypair
from tests.scanner import scenarios as sc


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> sc.World:
    return sc.world_at(tmp_path_factory.getbasetemp() / "acceptance-world")


def invoke(*args: object, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def fail_lines(result: Result) -> set[str]:
    return {
        line.split()[1].rstrip(":")
        for line in result.stderr.splitlines()
        if line.startswith("fail-on ")
    }


# --- --fail-on accumulates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--fail-on", "modified", "--fail-on", "no-record"],
        ["--fail-on", "no-record", "--fail-on", "modified"],
        ["--fail-on", "no-record,mixed", "--fail-on", "modified"],
    ],
)
def test_fail_on_given_twice_accumulates(world: sc.World, args: list[str]) -> None:
    # The world has modified and mixed libraries but no no-record one: with "last wins" the
    # first two cases exited 0 for a modified library.
    target, _ = world.image_target("oci")
    result = invoke("scan", target, "-f", "json", "--no-cache", "-q", *args)
    assert result.exit_code == 1, result.output
    expected = {"modified"} | ({"mixed"} if "no-record,mixed" in args else set())
    assert fail_lines(result) == expected


@pytest.mark.parametrize("value", ["", ",", "modified,,unowned"])
def test_an_empty_fail_on_kind_is_refused(world: sc.World, value: str) -> None:
    result = invoke("scan", world.root, "-f", "json", "--no-cache", "-q", "--fail-on", value)
    assert result.exit_code == 2
    assert "gpuprov: error: --fail-on: empty kind" in result.stderr


# --- kinds a scan cannot evaluate -------------------------------------------------------------


@pytest.fixture(scope="module")
def keypair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_keypair(tmp_path_factory.mktemp("keys"), "vendor", generate("ecdsa"))


def test_unsigned_and_conflict_without_trust_inputs_are_usage_errors(world: sc.World) -> None:
    target, _ = world.image_target("oci")
    result = invoke("scan", target, "-f", "json", "--no-cache", "--fail-on", "unsigned,conflict")
    assert result.exit_code == 2
    assert result.stdout == ""  # refused before scanning, nothing half-written
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("gpuprov: error:")]
    assert "conflict needs --catalog FILE with --trust POLICY.yaml or --trust-key PUB.pem" in line
    assert "unsigned needs an image target and --trust POLICY.yaml or --trust-key PUB.pem" in line


def test_conflict_with_a_key_but_no_catalog_is_a_usage_error(
    world: sc.World, keypair: tuple[Path, Path]
) -> None:
    target, _ = world.image_target("oci")
    args = ["scan", target, "--no-cache", "--trust-key", keypair[1], "--fail-on", "conflict"]
    result = invoke(*args)
    assert result.exit_code == 2
    assert "conflict needs --catalog FILE" in result.stderr
    assert "unsigned" not in result.stderr


def test_unsigned_on_a_host_is_a_usage_error_even_with_a_key(
    world: sc.World, keypair: tuple[Path, Path]
) -> None:
    args = ["--no-cache", "--trust-key", keypair[1], "--fail-on", "unsigned"]
    result = invoke("scan", world.root, *args)
    assert result.exit_code == 2
    assert "unsigned needs an image target" in result.stderr
    assert "a host directory has no image signature" in result.stderr


def test_unsigned_on_an_image_with_a_key_is_evaluated(
    world: sc.World, keypair: tuple[Path, Path]
) -> None:
    target, _ = world.image_target("oci")
    args = ["-f", "json", "--no-cache", "-q", "--trust-key", keypair[1], "--fail-on", "unsigned"]
    result = invoke("scan", target, *args)
    assert result.exit_code == 1, result.output
    assert fail_lines(result) == {"unsigned"}
    assert json.loads(result.stdout)["image_trust"]["signed"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--label", "env=ci"], "--label only applies with --push"),
        (["--server", "http://x", "--token-file", "t"], "--server, --token-file only apply"),
        (["--username", "u"], "--username only applies to registry: targets"),
        (["--insecure", "--ca-file", "ca.pem"], "--ca-file, --insecure only apply to registry"),
        (["--attestation", "a.json"], "--attestation only applies to image targets"),
        (["--max-ratio", "5", "--max-size", "1G"], "--max-ratio, --max-size only apply to image"),
        (["--max-layer-size", "1G"], "--max-layer-size only applies to image targets"),
        # an empty path named the root: a walk of the whole host, not of a subtree
        (["--include", ""], "--include: an empty path"),
        (["--include", "/usr", "--include", " "], "--include: an empty path"),
    ],
)
def test_options_this_scan_would_ignore_are_refused(
    world: sc.World, args: list[str], message: str
) -> None:
    result = invoke("scan", world.root, "--no-cache", "-f", "json", *args)
    assert result.exit_code == 2
    assert f"gpuprov: error: {message}" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--include", "/usr"], "--include only applies to host directory targets"),
        (["--all-filesystems"], "--all-filesystems only applies to host directory targets"),
    ],
)
def test_host_options_on_an_image_are_usage_errors(
    world: sc.World, args: list[str], message: str
) -> None:
    target, _ = world.image_target("oci")
    result = invoke("scan", target, "--no-cache", "-f", "json", *args)
    assert result.exit_code == 2
    assert "Usage: gpuprov scan" in result.stderr  # a usage error, shown as every other one
    assert f"gpuprov: error: {message}" in result.stderr


def test_cache_dir_with_no_cache_is_a_usage_error(world: sc.World, tmp_path: Path) -> None:
    result = invoke("scan", world.root, "--no-cache", "--cache-dir", tmp_path / "c", "-f", "json")
    assert result.exit_code == 2
    assert "gpuprov: error: --cache-dir does not apply with --no-cache" in result.stderr
    assert not (tmp_path / "c").exists()


def test_platform_on_a_host_directory_is_a_usage_error(world: sc.World) -> None:
    result = invoke("scan", world.root, "--no-cache", "-f", "json", "--platform", "linux/amd64")
    assert result.exit_code == 2
    assert "Usage: gpuprov scan" in result.stderr
    assert "gpuprov: error: --platform only applies to image targets" in result.stderr


# --- every repeatable option accumulates ------------------------------------------------------


def test_include_accumulates(world: sc.World) -> None:
    args = ["-f", "json", "--no-cache", "-q", "--include", sc.APP, "--include", sc.MIXED]
    result = invoke("scan", world.root, *args)
    assert result.exit_code == 0, result.output
    dirs = {lib["ref"]["path"].rsplit("/", 1)[0] for lib in json.loads(result.stdout)["libraries"]}
    assert dirs == {sc.APP, sc.MIXED}


def _signed_catalog(base: Path, component: str, key: Path) -> Path:
    root = base / component / "root"
    lib = root / "opt" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    build_cudnn_library(lib, component, filename=f"lib{component}.so.9.1.0")
    report, unsigned, signed = (base / component / n for n in ("r.json", "c.json", "c.dsse"))
    assert invoke("scan", root, "--no-cache", "-f", "cyclonedx", "-o", report).exit_code == 0
    assert invoke("catalog", "from-scan", report, "-o", unsigned).exit_code == 0
    assert invoke("catalog", "sign", unsigned, "--key", key, "-o", signed).exit_code == 0
    return signed


def test_catalog_accumulates(tmp_path: Path, keypair: tuple[Path, Path]) -> None:
    graph = _signed_catalog(tmp_path, "cudnn_graph", keypair[0])
    ops = _signed_catalog(tmp_path, "cudnn_ops", keypair[0])
    root = tmp_path / "target"
    lib = root / "opt" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    for component in ("cudnn_graph", "cudnn_ops"):
        build_cudnn_library(lib, component, filename=f"lib{component}.so.9.1.0")
    trust = ["--trust-key", keypair[1], "--catalog", graph, "--catalog", ops]
    result = invoke("scan", root, "--no-cache", "-f", "json", "-q", *trust)
    assert result.exit_code == 0, result.output
    verdicts = {
        lib["ident"]["component"]: lib["provenance"]
        for lib in json.loads(result.stdout)["libraries"]
    }
    assert verdicts == {"cudnn_graph": "verified", "cudnn_ops": "verified"}


def test_attestation_accumulates(
    world: sc.World, tmp_path: Path, keypair: tuple[Path, Path]
) -> None:
    target, _ = world.image_target("oci")
    files = []
    for name in ("one.sigstore.json", "two.sigstore.json"):
        path = tmp_path / name
        # A DSSE envelope whose signature no trusted key made: examined, then rejected.
        envelope = {
            "payloadType": "application/vnd.in-toto+json",
            "payload": base64.b64encode(b'{"_type": "https://in-toto.io/Statement/v1"}').decode(),
            "signatures": [{"keyid": name, "sig": base64.b64encode(b"not a signature").decode()}],
        }
        path.write_text(json.dumps(envelope))
        files += ["--attestation", str(path)]
    args = ["-f", "json", "--no-cache", "-q", "--trust-key", keypair[1], *files]
    result = invoke("scan", target, *args)
    assert result.exit_code == 0, result.output
    trust = json.loads(result.stdout)["image_trust"]
    assert trust["checked"] == 2 and trust["signed"] is False, trust


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", ["scan", "push", "agent"])
def test_label_accumulates(world: sc.World, tmp_path: Path, command: str) -> None:
    """Labels reach the report's delivery: here the spool, as the service is down."""
    token = tmp_path / "token"
    token.write_text("gpv_test\n")
    spool = tmp_path / "spool"
    report = tmp_path / "report.json"
    assert invoke("scan", sc_small_root(tmp_path), "-q", "--no-cache", "-o", report).exit_code == 0
    delivery = [
        "--server",
        f"http://127.0.0.1:{_closed_port()}",
        "--token-file",
        token,
        "--label",
        "env=ci",
        "--label",
        "team=gpu",
    ]
    env = {"GPUPROV_SPOOL": str(spool), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    if command == "scan":
        args = ["scan", sc_small_root(tmp_path), "-q", "--no-cache", "-o", report, "--push"]
    elif command == "push":
        args = ["push", report, "--retries", "0"]
    else:
        args = ["agent", "--once", "--root", sc_small_root(tmp_path), "--retries", "0"]
        args += ["--spool-dir", spool]
    result = invoke(*args, *delivery, env=env)
    assert result.exit_code == 3, result.output  # spooled
    (meta,) = spool.glob("*.meta.json")
    assert json.loads(meta.read_text())["labels"] == {"env": "ci", "team": "gpu"}


def sc_small_root(base: Path) -> Path:
    """A host root with one cuDNN library (built once per test directory)."""
    root = base / "small-root"
    lib = root / "opt" / "lib"
    if not lib.exists():
        lib.mkdir(parents=True)
        build_cudnn_library(lib, "cudnn_graph", filename="libcudnn_graph.so.9.1.0")
    return root


def test_a_command_added_later_is_strict_too() -> None:
    """Commands get `StrictCommand` by default, so a new one cannot reintroduce "last wins"."""
    import typer

    from scanner.cli_common import typer_app

    later = typer_app(name="gpuprov")

    @later.command("gate")
    def gate(policy: str = typer.Option("p", "--policy", help="policy name")) -> None:
        typer.echo(policy)

    @later.command("other")
    def other() -> None: ...

    result = CliRunner().invoke(later, ["gate", "--policy", "a", "--policy", "b"])
    assert result.exit_code == 2
    assert "gpuprov: error: --policy was given 2 times; it takes one value" in result.stderr
    assert CliRunner().invoke(later, ["gate", "--policy", "a"]).stdout == "a\n"
