"""`gpuprov scan`: the scanner's command, the only place of a scan that prints or exits.

The command checks its options, builds a `ScanOptions` and hands it to `scanner.pipeline`,
then writes the result in the chosen format. Exit codes (stable, documented in docs/cli.md):
0 clean, 1 findings matched ``--fail-on`` (or a verification was rejected), 2 usage error or
unreadable target. Imported only when `scan` (or `gate`) runs or its help is shown.

No ``from __future__ import annotations`` here: typer reads the command's annotations, and as
strings each was compiled again on every run (~2.5 ms of every scan's start-up); the names
imported for type checking only are quoted instead.
"""

import contextlib
import io
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from click.core import ParameterSource

from scanner.cli_common import (
    StrictCommand,
    fail,
    say,
    split_list,
    usage_error,
    write_output,
)
from scanner.errors import ScannerError
from scanner.model import FindingKind
from scanner.source import TARGET_FORMS

if TYPE_CHECKING:
    from scanner.advisories.local import LocalFeed
    from scanner.model import ScanResult
    from scanner.pipeline import ScanOptions
    from scanner.source.registry import RegistryOptions

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
    CYCLONEDX = "cyclonedx"
    SPDX_JSON = "spdx-json"  # SPDX 2.3 JSON (scanner/bom/spdx_writer.py)


class VexFormat(StrEnum):
    OPENVEX = "openvex"
    CYCLONEDX = "cyclonedx"


class SpecVersion(StrEnum):
    V1_6 = "1.6"
    V1_7 = "1.7"


#: Every --fail-on kind, with what a scan must be given to evaluate it (None: any scan can).
#: A kind the scan cannot evaluate is a usage error, never a silent pass.
FAIL_ON_NEEDS: dict[str, str | None] = {
    "modified": None,
    "unowned": None,
    "mixed": None,
    "no-record": None,
    "conflict": "--catalog FILE with --trust POLICY.yaml or --trust-key PUB.pem",
    "unsigned": "an image target and --trust POLICY.yaml or --trust-key PUB.pem",
    "not-elf": None,
    "unreadable": None,
    "loaded-unowned": "--runtime (a host root with live processes)",
    "loaded-deleted": "--runtime (a host root with live processes)",
    "loaded-differs-from-disk": "--runtime (a host root with live processes)",
}
_LOADED_KINDS = ("loaded-unowned", "loaded-deleted", "loaded-differs-from-disk")
FAIL_ON_KINDS = tuple(kind.value for kind in FindingKind)

#: Options that only some scans use, by the scans they apply to. Giving one to another scan
#: is a usage error: an ignored option is a silent pass.
_APPLIES_ONLY: dict[str, tuple[str, ...]] = {
    "to registry: targets": ("username", "password_stdin", "ca_file", "insecure"),
    "to image targets": ("attestation", "max_ratio", "max_layer_size", "max_size", "platform"),
    "with --push": ("server", "token_file", "label"),
    "to host directory targets": (
        "include",
        "all_filesystems",
        "runtime",
        "proc",
        "nvidia_smi_xml",
        "container_cli_list",
        "cdi_spec",
        "no_node",
    ),
}


def _parse_fail_on(values: list[str] | None) -> set[str]:
    kinds = split_list(values)
    if values is not None and not all(kinds):
        usage_error("empty kind; give e.g. --fail-on modified,unowned", "--fail-on")
    unknown = set(kinds) - set(FAIL_ON_KINDS)
    if unknown:
        usage_error(
            f"unknown kind(s) {', '.join(sorted(unknown))}; choose from {', '.join(FAIL_ON_KINDS)}",
            "--fail-on",
        )
    return set(kinds)


def _unevaluable(
    kinds: set[str], *, trust: bool, catalogs: bool, image: bool | None, runtime: bool = False
) -> list[str]:
    """The --fail-on kinds this scan cannot evaluate, each with the inputs it needs.

    ``image`` is None when the target's kind is not known yet (the scan then reports why).
    """
    missing = [f"{k} needs {FAIL_ON_NEEDS[k]}" for k in _LOADED_KINDS if k in kinds and not runtime]
    if "conflict" in kinds and not (catalogs and trust):
        missing.append(f"conflict needs {FAIL_ON_NEEDS['conflict']}")
    if "unsigned" in kinds and (not trust or image is False):
        why = " (a host directory has no image signature)" if image is False else ""
        missing.append(f"unsigned needs {FAIL_ON_NEEDS['unsigned']}{why}")
    return missing


def _is_image(target: str) -> bool | None:
    """Whether ``target`` names an image (True) or a host directory (False), without opening it."""
    from scanner.source import parse_target

    try:
        return parse_target(target)[0] != "dir"
    except ScannerError:
        return None  # the scan itself reports what is wrong with the target


def _parse_size(value: str | None) -> int | None:
    if value is None:
        return None
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    v = value.strip().lower().removesuffix("b").removesuffix("i")
    try:
        if v and v[-1] in units:
            return int(float(v[:-1]) * units[v[-1]])
        return int(v)
    except ValueError:
        raise typer.BadParameter(f"not a size: {value!r} (e.g. 64G)") from None


def _refuse_ignored(ctx: typer.Context, applies: dict[str, bool]) -> None:
    """Refuse the options given to a scan that would ignore them (see `_APPLIES_ONLY`)."""
    options = {p.name: p.opts[0] for p in ctx.command.params}
    for where, names in _APPLIES_ONLY.items():
        given = [
            options[name]
            for name in names
            if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
        ]
        if given and not applies[where]:
            usage_error(f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} {where}")


def scan(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            help=f"What to scan: {TARGET_FORMS} (a directory is a host root such as / or "
            "/host; a tar file's format is sniffed)."
        ),
    ],
    fmt: Annotated[
        Format | None,
        typer.Option(
            "--format",
            "-f",
            help="Output format (default: table on a terminal, else cyclonedx); spdx-json: "
            "SPDX 2.3 JSON.",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report to FILE.")
    ] = None,
    spec_version: Annotated[
        SpecVersion, typer.Option("--spec-version", help="CycloneDX spec version.")
    ] = SpecVersion.V1_6,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when any of these is found (repeatable, or comma-separated): "
            + ", ".join(FAIL_ON_KINDS)
            + ". conflict needs --catalog and --trust*; unsigned needs an image and --trust*.",
        ),
    ] = None,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            help="Table (implies -f table): full SHA-256 digests, one line per library, any width.",
        ),
    ] = False,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache-dir", help="Cache directory ($GPUPROV_CACHE_DIR or ~/.cache/gpuprov)."
        ),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Neither read nor write caches.")
    ] = False,
    all_filesystems: Annotated[
        bool,
        typer.Option("--all-filesystems", help="Host scans: cross into other mounted filesystems."),
    ] = False,
    include: Annotated[
        list[str] | None,
        typer.Option("--include", help="Host scans: walk only this subtree (repeatable)."),
    ] = None,
    platform: Annotated[
        str | None, typer.Option("--platform", help="os/arch in a multi-arch image index.")
    ] = None,
    max_ratio: Annotated[
        float | None, typer.Option("--max-ratio", help="Refuse layers expanding more than this.")
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option("--max-size", help="Refuse images expanding past this size (e.g. 64G)."),
    ] = None,
    max_layer_size: Annotated[
        str | None,
        typer.Option("--max-layer-size", help="Refuse a layer expanding past this size (16G)."),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Hashing threads (0: one per CPU).")
    ] = 0,
    catalog: Annotated[
        list[Path] | None,
        typer.Option("--catalog", help="Signed reference catalog (repeatable); needs --trust*."),
    ] = None,
    trust: Annotated[
        Path | None, typer.Option("--trust", help="Trust policy YAML (keys, identities, scopes).")
    ] = None,
    trust_key: Annotated[
        Path | None, typer.Option("--trust-key", help="Trust exactly this public key (PEM).")
    ] = None,
    attestation: Annotated[
        list[Path] | None,
        typer.Option(
            "--attestation",
            help="Local Sigstore bundle or DSSE envelope about the image (repeatable).",
        ),
    ] = None,
    username: Annotated[
        str | None, typer.Option("--username", help="Registry user (else ~/.docker/config.json).")
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the registry password from stdin.")
    ] = False,
    ca_file: Annotated[
        Path | None, typer.Option("--ca-file", help="Extra CA certificates for the registry.")
    ] = None,
    insecure: Annotated[
        bool,
        typer.Option("--insecure", help="UNSAFE: skip registry TLS checks, allow plain HTTP."),
    ] = False,
    nvidia_smi_xml: Annotated[
        Path | None,
        typer.Option(
            "--nvidia-smi-xml",
            help="Host scans: saved `nvidia-smi -q -x` output of the node (else the live "
            "root's nvidia-smi is run when it exists).",
        ),
    ] = None,
    container_cli_list: Annotated[
        Path | None,
        typer.Option(
            "--container-cli-list",
            help="Host scans: saved `nvidia-container-cli list` output (legacy injection).",
        ),
    ] = None,
    cdi_spec: Annotated[
        list[Path] | None,
        typer.Option(
            "--cdi-spec",
            help="Host scans: a CDI spec outside ROOT/etc/cdi and ROOT/var/run/cdi (repeatable).",
        ),
    ] = None,
    no_node: Annotated[
        bool,
        typer.Option(
            "--no-node-facts",
            help="Host scans: skip the driver, GPUs, CDI injection and L4T release.",
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="No progress display and no skipped-item messages."),
    ] = False,
    push: Annotated[
        bool,
        typer.Option(
            "--push",
            help="Also deliver the CycloneDX report to the service ($GPUPROV_SERVER, "
            "$GPUPROV_TOKEN or --token-file); spooled when it is unreachable.",
        ),
    ] = False,
    server: Annotated[str | None, typer.Option("--server", help="Service URL for --push.")] = None,
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="Agent token file for --push.")
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="KEY=VALUE label sent with --push (repeatable)."),
    ] = None,
    runtime: Annotated[
        bool,
        typer.Option(
            "--runtime",
            help="Host roots: also list the GPU libraries live processes have mapped (pid, "
            "executable, container, pod), hashed as loaded; needs root for other users' "
            "processes and for deleted files.",
        ),
    ] = False,
    proc: Annotated[
        Path | None,
        typer.Option(
            "--proc",
            help="With --runtime: the live processes' proc directory (default ROOT/proc, e.g. "
            "/host/proc for a mounted host).",
        ),
    ] = None,
    vex_out: Annotated[
        Path | None,
        typer.Option(
            "--vex-out",
            help="Also write a VEX document of the scan matched against --advisories to FILE.",
        ),
    ] = None,
    vex_format: Annotated[
        VexFormat,
        typer.Option("--vex-format", help="With --vex-out: openvex (v0.2.0) or cyclonedx (1.6)."),
    ] = VexFormat.OPENVEX,
    advisories: Annotated[
        list[Path] | None,
        typer.Option(
            "--advisories",
            help="With --vex-out: advisory documents (CSAF 2.0, OSV, CVE Record) or a directory "
            "of them, as for `gpuprov advisories import` (repeatable).",
        ),
    ] = None,
) -> None:
    """Scan a host root or a container image for GPU libraries and report them."""
    from scanner.imageref import is_registry_target
    from scanner.node.inputs import NodeInputs
    from scanner.pipeline import ScanOptions
    from scanner.verify.inputs import TrustInputs

    fail_kinds = _parse_fail_on(fail_on)
    total = _parse_size(max_size)
    layer_total = _parse_size(max_layer_size)
    is_registry = is_registry_target(target)
    image = True if is_registry else _is_image(target)
    _refuse_ignored(
        ctx,
        {
            "to registry: targets": is_registry,
            "to image targets": image is not False,
            "with --push": push,
            "to host directory targets": image is not True,
        },
    )
    if proc is not None and not runtime:
        usage_error("--proc only applies with --runtime")
    if no_cache and ctx.get_parameter_source("cache_dir") is ParameterSource.COMMANDLINE:
        usage_error("--cache-dir does not apply with --no-cache (no cache is read or written)")
    trust_inputs = TrustInputs(
        trust=trust,
        trust_key=trust_key,
        catalogs=tuple(catalog or ()),
        attestations=tuple(attestation or ()),
    )
    missing = _unevaluable(
        fail_kinds,
        trust=bool(trust or trust_key),
        catalogs=bool(catalog),
        image=image,
        runtime=runtime,
    )
    if missing:
        usage_error("; ".join(missing), "--fail-on")
    if any(not path.strip() for path in include or ()):
        # an empty path would name the root itself: the whole host, not a subtree
        usage_error("an empty path; give a directory inside the root, such as /opt", "--include")
    labels = _labels(label) if push else {}
    feed = _vex_feed(ctx, vex_out, advisories)
    options = ScanOptions(
        cache_dir=cache_dir,
        use_cache=not no_cache,
        all_filesystems=all_filesystems,
        include=tuple(include or ()),
        platform=platform,
        workers=workers,
        max_ratio=max_ratio,
        max_total_bytes=total,
        max_layer_bytes=layer_total,
        trust=trust_inputs,
        runtime=runtime,
        proc=str(proc) if proc is not None else None,
        registry=(
            _registry_options(username, password_stdin, ca_file, insecure) if is_registry else None
        ),
        node=NodeInputs(
            enabled=not no_node,
            nvidia_smi_xml=str(nvidia_smi_xml) if nvidia_smi_xml else None,
            container_cli_list=str(container_cli_list) if container_cli_list else None,
            extra_cdi=tuple(str(p) for p in cdi_spec or ()),
        ),
    )
    if wide and fmt not in (None, Format.TABLE):
        usage_error(f"only applies to -f table, not -f {fmt.value}", "--wide")
    # Asking for a wide table asks for a table, on a terminal or not.
    tty_default = Format.TABLE if sys.stdout.isatty() and output is None else Format.CYCLONEDX
    chosen = fmt or (Format.TABLE if wide else tty_default)
    spec_given = ctx.get_parameter_source("spec_version") is ParameterSource.COMMANDLINE
    if spec_given and chosen is not Format.CYCLONEDX and not push:
        usage_error(
            f"only applies to the CycloneDX report (-f cyclonedx, or --push), not -f "
            f"{chosen.value}",
            "--spec-version",
        )
    result = _run(target, options, quiet=quiet)
    _require_included(include or [], result)
    kept = options.resolved_cache_dir() if options.use_cache else None
    report = _write_report(result, chosen, output, spec_version, wide=wide, cache_dir=kept)
    code = _fail_on(result, fail_kinds, tell_skipped=not quiet and chosen is not Format.TABLE)
    if feed is not None and vex_out is not None:
        from scanner.cli_vex import write_vex

        write_vex(result, feed, vex_format.value, vex_out)
    if push:
        from scanner.bom.cyclonedx import to_json as bom_json
        from scanner.cli_agent import push_report

        bom = report if chosen is Format.CYCLONEDX else bom_json(result, spec_version.value)
        pushed = push_report(bom.encode(), server=server, token_file=token_file, labels=labels)
        # Findings decide a gate: they win over a delivery problem (named on stderr anyway).
        code = code or pushed
    if code != EXIT_OK:
        raise typer.Exit(code)


def _vex_feed(
    ctx: typer.Context, vex_out: Path | None, advisories: list[Path] | None
) -> "LocalFeed | None":
    """The local feed ``--vex-out`` matches against, read before the scan: a bad feed stops
    the command before anything is written."""
    if vex_out is None:
        if advisories:
            usage_error("only applies with --vex-out", "--advisories")
        if ctx.get_parameter_source("vex_format") is ParameterSource.COMMANDLINE:
            usage_error("only applies with --vex-out", "--vex-format")
        return None
    if not advisories:
        usage_error(
            "needs --advisories PATH (the advisory documents to match the scan against)",
            "--vex-out",
        )
    from scanner.cli_vex import read_feed

    return read_feed(advisories)


def _labels(values: list[str] | None) -> dict[str, str]:
    from scanner.deliver import labels_from

    try:
        return labels_from(values or [])
    except ScannerError as e:
        usage_error(str(e), "--label")


def _registry_options(
    username: str | None, password_stdin: bool, ca_file: Path | None, insecure: bool
) -> "RegistryOptions":
    # Imported only here: the HTTP client costs a registry-less scan 0.1 s of start-up.
    from scanner.source.registry import RegistryOptions

    return RegistryOptions(
        username=username,
        password=sys.stdin.readline().rstrip("\n") if password_stdin else None,
        ca_file=str(ca_file) if ca_file else None,
        insecure=insecure,
    )


def _run(target: str, options: "ScanOptions", *, quiet: bool) -> "ScanResult":
    """The scan, with a progress display on a terminal's stderr unless ``quiet``."""
    from dataclasses import replace

    from scanner.pipeline import run_scan

    display = None
    if not quiet and sys.stderr.isatty():
        from scanner.cli_progress import ProgressDisplay

        display = ProgressDisplay(sys.stderr)
        options = replace(options, progress=display.update)
    try:
        with display or contextlib.nullcontext():
            return run_scan(target, options)
    except ScannerError as e:
        raise fail(str(e), EXIT_USAGE) from None


def _write_report(
    result: "ScanResult",
    chosen: Format,
    output: Path | None,
    spec: SpecVersion,
    *,
    wide: bool,
    cache_dir: Path | None,
) -> str:
    """Write the report in the chosen format; returns its text (empty for a table).
    ``cache_dir``: where a CycloneDX document is kept for an identical rescan (None: not)."""
    if chosen is Format.TABLE:
        from scanner.report import render_table

        if output is None:
            render_table(result, sys.stdout, color=sys.stdout.isatty(), wide=wide)
            return ""
        # Through write_output like the other formats: atomic, and an unwritable FILE is a
        # clear error (exit 2) instead of a traceback from open().
        buf = io.StringIO()
        render_table(result, buf, color=False, wide=wide)
        write_output(_line_ended(buf.getvalue()), output)
        return ""
    if chosen is Format.JSON:
        from scanner.report import to_json

        text = to_json(result)
    elif chosen is Format.SPDX_JSON:
        from scanner.bom.spdx_writer import to_json as spdx_json

        text = spdx_json(result)
    else:
        from scanner.bom.reuse import cyclonedx_json

        text = cyclonedx_json(result, spec.value, cache_dir)
    write_output(_line_ended(text), output)
    return text


def _line_ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _fail_on(result: "ScanResult", kinds: set[str], *, tell_skipped: bool) -> int:
    """Say what was skipped (when asked) and which findings match ``--fail-on``; the exit code."""
    if tell_skipped:
        for s in result.skipped:
            say(f"skipped: {s.stage}: {s.path}: {s.reason}")
    matched = [f for f in result.findings if f.kind in kinds or kinds & set(f.also)]
    for f in matched:
        say(f"fail-on {f.kind}: {', '.join(f.paths) or f.message}")
    return EXIT_FINDINGS if matched else EXIT_OK


def _require_included(include: list[str], result: "ScanResult") -> None:
    """Refuse a host scan whose every --include path is missing: it scanned nothing, and a
    typo must not pass as a clean host (one missing path among others is a skipped item)."""
    from scanner.source.directory import INCLUDE_NOT_FOUND
    from scanner.source.interface import normalize

    missing = {s.path for s in result.skipped if s.reason == INCLUDE_NOT_FOUND}
    if include and all(normalize(path) in missing for path in include):
        raise fail(
            f"--include: {', '.join(include)}: not found inside {result.asset.reference}; "
            "nothing was scanned",
            EXIT_USAGE,
        )


def register(app: typer.Typer) -> None:
    """Add `scan` to a `gpuprov` command line."""
    app.command("scan", cls=StrictCommand)(scan)
