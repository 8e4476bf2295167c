"""Command line of the scanner agent: the only place that prints or exits.

Exit codes (stable, documented in docs/cli.md): 0 clean, 1 findings matched ``--fail-on``
(or a verification was rejected), 2 usage error or unreadable target.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scanner import __version__
from scanner.cli_common import (
    StrictCommand,
    fail,
    say,
    split_list,
    typer_app,
    usage_error,
)
from scanner.errors import ScannerError
from scanner.model import FindingKind

if TYPE_CHECKING:
    from scanner.model import ScanResult

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2

app = typer_app(
    name="gpuprov",
    help="Inventory and provenance of GPU libraries (cuDNN, CUDA, NCCL, ...) in hosts and images.",
)


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
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
}
FAIL_ON_KINDS = tuple(kind.value for kind in FindingKind)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"gpuprov {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """gpuprov: which GPU libraries run where, are they the vendor's bytes, may this ship?"""


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


def _unevaluable(kinds: set[str], *, trust: bool, catalogs: bool, image: bool | None) -> list[str]:
    """The --fail-on kinds this scan cannot evaluate, each with the inputs it needs.

    ``image`` is None when the target's kind is not known yet (the scan then reports why).
    """
    missing = []
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


def _check_applicable(given: dict[str, bool], applies: bool, where: str) -> None:
    """Refuse options that this scan would ignore (an ignored option is a silent pass)."""
    if not applies:
        names = [name for name, used in given.items() if used]
        if names:
            usage_error(f"{', '.join(names)} only appl{'ies' if len(names) == 1 else 'y'} {where}")


@app.command(cls=StrictCommand)
def scan(
    target: Annotated[
        str,
        typer.Argument(
            help="A directory (host root such as / or /host), oci:DIR[:TAG], "
            "oci-archive:FILE[:TAG], docker-archive:FILE, or a tar file (format sniffed)."
        ),
    ],
    fmt: Annotated[
        Format | None,
        typer.Option(
            "--format", "-f", help="Output format (default: table on a terminal, else cyclonedx)."
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
            "--wide", help="Table: full SHA-256 digests, one line per library, any width."
        ),
    ] = False,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="Cache directory (~/.cache/gpuprov).")
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
) -> None:
    """Scan a host root or a container image for GPU libraries and report them."""
    from scanner.pipeline import ScanOptions, run_scan
    from scanner.source.reference import is_registry_target
    from scanner.verify.inputs import TrustInputs

    fail_kinds = _parse_fail_on(fail_on)
    total = _parse_size(max_size)
    layer_total = _parse_size(max_layer_size)
    is_registry = is_registry_target(target)
    image = True if is_registry else _is_image(target)
    _check_applicable(
        {
            "--username": username is not None,
            "--password-stdin": password_stdin,
            "--ca-file": ca_file is not None,
            "--insecure": insecure,
        },
        is_registry,
        "to registry: targets",
    )
    _check_applicable(
        {
            "--attestation": bool(attestation),
            "--max-ratio": max_ratio is not None,
            "--max-layer-size": max_layer_size is not None,
            "--max-size": max_size is not None,
        },
        image is not False,
        "to image targets",
    )
    _check_applicable(
        {
            "--server": server is not None,
            "--token-file": token_file is not None,
            "--label": bool(label),
        },
        push,
        "with --push",
    )
    missing = _unevaluable(
        fail_kinds, trust=bool(trust or trust_key), catalogs=bool(catalog), image=image
    )
    if missing:
        usage_error("; ".join(missing), "--fail-on")
    labels: dict[str, str] = {}
    if push:
        from scanner.deliver import labels_from

        try:
            labels = labels_from(label or [])
        except ScannerError as e:
            usage_error(str(e), "--label")

    registry = None
    if is_registry:
        # Imported only here: the HTTP client costs a registry-less scan 0.1 s of start-up.
        from scanner.source.registry import RegistryOptions

        registry = RegistryOptions(
            username=username,
            password=sys.stdin.readline().rstrip("\n") if password_stdin else None,
            ca_file=str(ca_file) if ca_file else None,
            insecure=insecure,
        )

    chosen = fmt or (Format.TABLE if sys.stdout.isatty() and output is None else Format.CYCLONEDX)
    display = None
    if not quiet and sys.stderr.isatty():
        from scanner.cli_progress import ProgressDisplay

        display = ProgressDisplay(sys.stderr)
    try:
        with display or contextlib.nullcontext():
            result = run_scan(
                target,
                ScanOptions(
                    cache_dir=cache_dir,
                    use_cache=not no_cache,
                    all_filesystems=all_filesystems,
                    include=tuple(include or ()),
                    platform=platform,
                    workers=workers,
                    max_ratio=max_ratio,
                    max_total_bytes=total,
                    max_layer_bytes=layer_total,
                    progress=display.update if display is not None else None,
                    trust=TrustInputs(
                        trust=trust,
                        trust_key=trust_key,
                        catalogs=tuple(catalog or ()),
                        attestations=tuple(attestation or ()),
                    ),
                    registry=registry,
                ),
            )
    except ScannerError as e:
        raise fail(str(e), EXIT_USAGE) from None
    _require_included(include or [], result)

    text = ""
    if chosen is Format.TABLE:
        from scanner.report import render_table

        if output is not None:
            # Through _write like the other formats: atomic, and an unwritable FILE is a
            # clear error (exit 2) instead of a traceback from open().
            buf = io.StringIO()
            render_table(result, buf, color=False, wide=wide)
            _write(buf.getvalue(), output)
        else:
            render_table(result, sys.stdout, color=sys.stdout.isatty(), wide=wide)
    else:
        if chosen is Format.JSON:
            from scanner.report import to_json

            text = to_json(result)
        else:
            from scanner.bom.cyclonedx import to_json as bom_json

            text = bom_json(result, spec_version.value)
        _write(text, output)

    if not quiet and chosen is not Format.TABLE:
        for s in result.skipped:
            say(f"skipped: {s.stage}: {s.path}: {s.reason}")
    matched = [f for f in result.findings if f.kind in fail_kinds or fail_kinds & set(f.also)]
    for f in matched:
        say(f"fail-on {f.kind}: {', '.join(f.paths) or f.message}")
    code = EXIT_FINDINGS if matched else EXIT_OK
    if push:
        from scanner.bom.cyclonedx import to_json as bom_json
        from scanner.cli_agent import push_report

        report = text if chosen is Format.CYCLONEDX else bom_json(result, spec_version.value)
        pushed = push_report(report.encode(), server=server, token_file=token_file, labels=labels)
        # Findings decide a gate: they win over a delivery problem (named on stderr anyway).
        code = code or pushed
    if code != EXIT_OK:
        raise typer.Exit(code)


def _require_included(include: list[str], result: ScanResult) -> None:
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


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        return
    tmp = output.with_name(output.name + f".tmp{os.getpid()}")
    try:
        tmp.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        os.replace(tmp, output)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()  # never leave a partial report behind
        raise fail(f"cannot write {output}: {e.strerror or e}", EXIT_USAGE) from None


def register_all(argv: list[str]) -> None:
    """Add the agent and provenance commands to `app`, unless the command is ``scan``.

    Their modules pull in httpx, cryptography and sigstore (about 0.25 s of imports), which a
    ``scan`` never needs; skipping them keeps a warm host rescan fast.
    """
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words[:1] == ["scan"] or any(c.name == "push" for c in app.registered_commands):
        return
    from scanner import cli_agent, cli_gate, cli_provenance

    cli_agent.register(app)
    cli_provenance.register(app)
    cli_gate.register(app)


def main() -> None:
    """Console entry point of the scanner-only CLI."""
    register_all(sys.argv)
    app()


if __name__ == "__main__":
    main()
