"""Agent commands: `gpuprov push` delivers saved reports, `gpuprov agent` scans and pushes
periodically (a systemd unit or a Kubernetes DaemonSet runs it).

Exit codes: 0 delivered, 1 refused by the service (a report set aside, the agent's token refused,
or a scan failed), 2 usage error, 3 the report waits in the spool for a later delivery (the
service was unavailable, or another process is delivering the spool), 4 the report was neither
delivered nor spooled (the spool's disk is full or cannot be written; the reports spooled
before are kept).
"""

from __future__ import annotations

import re
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from scanner.cli_common import StrictCommand, error, fail, say, usage_error
from scanner.deliver import (
    Backoff,
    Client,
    FlushResult,
    Halt,
    ReportRejected,
    Spool,
    Target,
    default_spool_dir,
    describe,
    flush,
    labels_from,
    push,
)
from scanner.errors import ScannerError, UsageError

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2
EXIT_SPOOLED = 3
EXIT_NOT_KEPT = 4

Server = Annotated[
    str | None,
    typer.Option("--server", help="service URL; default $GPUPROV_SERVER", show_default=False),
]
TokenFile = Annotated[
    Path | None,
    typer.Option(
        "--token-file",
        help="file holding the API token; default $GPUPROV_TOKEN",
        show_default=False,
    ),
]
SpoolDir = Annotated[
    Path | None,
    typer.Option(
        "--spool-dir",
        help="where undeliverable reports wait; default $GPUPROV_SPOOL or "
        "~/.local/share/gpuprov/spool",
        show_default=False,
    ),
]
Retries = Annotated[
    int,
    typer.Option(
        "--retries",
        min=0,
        max=20,
        help="retries (with exponential backoff) before a report is spooled",
    ),
]
Labels = Annotated[
    list[str] | None,
    typer.Option("--label", help="asset label KEY=VALUE sent with each report (repeatable)"),
]

_INTERVAL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_interval(text: str) -> float:
    """``90s``, ``30m``, ``6h``, ``1d`` (or bare seconds) to seconds."""
    match = _INTERVAL.match(text.strip().lower())
    if not match:
        raise typer.BadParameter(f"{text!r} is not a duration like 30m, 6h or 1d")
    if float(match.group(1)) <= 0:
        raise typer.BadParameter(f"{text!r}: the time between scans must be more than 0 (30m, 6h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _setup(
    server: str | None, token_file: Path | None, spool_dir: Path | None
) -> tuple[Client, Spool]:
    try:
        target = Target.resolve(server, token_file)
    except UsageError as e:
        raise fail(str(e), EXIT_USAGE) from e
    return Client(target), Spool(spool_dir or default_spool_dir())


def _report_flush(result: FlushResult, spool: Spool) -> None:
    for delivered in result.delivered:
        say(f"delivered spooled report: {describe(delivered)}")
    for path, reason in result.rejected:
        error(f"spooled report set aside in {path}: {reason}")
    for path, reason in result.deferred:
        say(f"spooled report {path.name} is retried later (it got: {reason})")
    if result.busy is not None:
        holder = f" (pid {result.busy})" if result.busy else ""
        say(
            f"another gpuprov process{holder} is delivering the spool {spool.directory}; "
            f"{result.remaining} report(s) wait there"
        )


def _list_rejected(spool: Spool) -> None:
    """Every set-aside report with its reason: they are never retried by themselves."""
    dead = spool.rejected()
    if not dead:
        return
    say(
        f"{len(dead)} report(s) set aside in {spool.rejected_dir}, not retried (the service "
        "refused them or kept failing on them; once fixed, `gpuprov push --spool --requeue`):"
    )
    for entry in dead:
        say(f"  {entry.path.name}: {entry.reason or 'no reason recorded'}")


def _halt_code(halt: Halt | None) -> int:
    return EXIT_REJECTED if halt is Halt.UNAUTHORIZED else EXIT_SPOOLED


def _push_once(
    client: Client, spool: Spool, report: bytes, labels: dict[str, str], backoff: Backoff
) -> int:
    try:
        outcome = push(report, client, spool, labels, backoff)
    except ReportRejected as e:
        error(str(e))
        return EXIT_REJECTED
    except UsageError as e:
        error(str(e))
        return EXIT_USAGE
    _report_flush(outcome.flushed, spool)
    if outcome.delivered is not None:
        say(f"delivered: {describe(outcome.delivered)}")
        return EXIT_OK
    if outcome.not_kept is not None:
        error(f"report not delivered ({outcome.error}), and not spooled: {outcome.not_kept}")
        return EXIT_NOT_KEPT
    assert outcome.spooled is not None
    why = {
        Halt.UNAUTHORIZED: "not delivered",
        Halt.SERVER_ERRORS: "the service failed on it",
    }.get(outcome.halt or Halt.UNAVAILABLE, "service unavailable")
    error(
        f"{why} ({outcome.error}); report spooled to "
        f"{outcome.spooled.path}; `gpuprov push --spool` (or any later push) delivers it"
    )
    return _halt_code(outcome.halt)


def push_report(
    report: bytes,
    *,
    server: str | None = None,
    token_file: Path | None = None,
    spool_dir: Path | None = None,
    labels: dict[str, str] | None = None,
    retries: int = 2,
) -> int:
    """Deliver one report as `gpuprov push` does (messages on stderr); returns its exit code.

    For commands that produce a report and deliver it in one step (`gpuprov scan --push`).
    """
    try:
        target = Target.resolve(server, token_file)
    except UsageError as e:
        error(str(e))
        return EXIT_USAGE
    spool = Spool(spool_dir or default_spool_dir())
    with Client(target) as client:
        return _push_once(client, spool, report, dict(labels or {}), Backoff(retries + 1))


def push_command(
    report: Annotated[
        Path | None,
        typer.Argument(help="CycloneDX JSON report (from `gpuprov scan --format cyclonedx`)"),
    ] = None,
    spool_only: Annotated[
        bool, typer.Option("--spool", help="deliver the spooled reports only")
    ] = False,
    requeue: Annotated[
        bool,
        typer.Option(
            "--requeue",
            help="with --spool: put the set-aside reports (spool/rejected/) back in the queue "
            "first, once what refused them is fixed",
        ),
    ] = False,
    server: Server = None,
    token_file: TokenFile = None,
    spool_dir: SpoolDir = None,
    label: Labels = None,
    retries: Retries = 2,
) -> None:
    """Deliver a saved report (and anything spooled) to the gpuprov service."""
    if requeue and not spool_only:
        usage_error("--requeue goes with --spool (gpuprov push --spool --requeue)")
    if (report is None) != spool_only:
        usage_error("give either a REPORT file or --spool")
    try:
        labels = labels_from(label or [])
        data = report.read_bytes() if report is not None else b""
    except UsageError as e:
        raise fail(str(e), EXIT_USAGE) from e
    except OSError as e:
        raise fail(f"cannot read {report}: {e.strerror}", EXIT_USAGE) from e
    client, spool = _setup(server, token_file, spool_dir)
    backoff = Backoff(attempts=retries + 1)
    with client:
        if report is None:
            if requeue:
                say(f"{spool.requeue()} set-aside report(s) put back in {spool.directory}")
            raise typer.Exit(_flush_spool(client, spool, backoff))
        raise typer.Exit(_push_once(client, spool, data, labels, backoff))


def _flush_spool(client: Client, spool: Spool, backoff: Backoff) -> int:
    """`gpuprov push --spool`: deliver what waits, say what stays and what was set aside."""
    result = flush(spool, client, backoff)
    _report_flush(result, spool)
    _list_rejected(spool)
    if result.busy is not None:
        return EXIT_SPOOLED
    if result.error:
        error(f"{result.error}; {result.remaining} report(s) stay in {spool.directory}")
        return _halt_code(result.halt)
    if result.remaining:
        say(f"{result.remaining} report(s) wait in {spool.directory} for a later retry")
        return EXIT_REJECTED if result.rejected else EXIT_SPOOLED
    say(f"spool {spool.directory} is empty")
    return EXIT_REJECTED if result.rejected else EXIT_OK


def _scan(root: str, runtime: bool, proc: Path | None) -> bytes:
    # imported here: the pipeline pulls in every scanner stage
    from scanner.bom.cyclonedx import to_json
    from scanner.pipeline import ScanOptions, run_scan

    options = ScanOptions(runtime=runtime, proc=str(proc) if proc is not None else None)
    return to_json(run_scan(root, options)).encode()


def _runtime_default(root: str, runtime: bool | None, proc: Path | None) -> bool:
    """--runtime unless told otherwise when the root has live processes (a live root)."""
    if runtime is not None or proc is not None:
        return runtime is not False
    from scanner.runtime.procfs import looks_like_proc

    return looks_like_proc(str(proc) if proc is not None else f"{root.rstrip('/')}/proc")


def _scan_node(root: str, runtime: bool, proc: Path | None) -> list[tuple[str, bytes | None]]:
    """The host report, its running containers linked to their images, then one report per
    image digest of the node's containerd and Docker stores: (what, report or None if its
    scan failed; the failure was told on stderr)."""
    from msgspec.structs import replace

    from scanner.bom.cyclonedx import to_json
    from scanner.nodestores import discover, node_platform
    from scanner.pipeline import ScanOptions, run_scan

    inventory = discover(root, node_platform(), str(proc) if proc is not None else None)
    options = ScanOptions(runtime=runtime, proc=str(proc) if proc is not None else None)
    host = replace(run_scan(root, options), containers=tuple(inventory.containers))
    reports: list[tuple[str, bytes | None]] = [(root, to_json(host).encode())]
    for problem in inventory.errors:
        error(f"image store: {problem}")
        reports.append((problem, None))
    for image in inventory.images:
        try:
            result = run_scan(image.target, ScanOptions(platform=image.platform))
        except ScannerError as e:
            error(f"scan of {image.target} failed: {e}")
            reports.append((image.target, None))
            continue
        reports.append((image.target, to_json(result).encode()))
    return reports


def agent_command(
    root: Annotated[str, typer.Option("--root", help="host root to scan (e.g. / or /host)")] = "/",
    interval: Annotated[str, typer.Option("--interval", help="time between scans")] = "6h",
    once: Annotated[bool, typer.Option("--once", help="scan and push once, then exit")] = False,
    images: Annotated[
        bool,
        typer.Option(
            "--images/--no-images",
            help="also report each image of the node's containerd and Docker stores (once per "
            "digest) and link running containers to them",
        ),
    ] = True,
    server: Server = None,
    token_file: TokenFile = None,
    spool_dir: SpoolDir = None,
    label: Labels = None,
    retries: Retries = 2,
    runtime: Annotated[
        bool,
        typer.Option(
            "--runtime",
            help="list the GPU libraries live processes have mapped (the default when the "
            "root, or --proc, has live processes); an error when it has none",
        ),
    ] = False,
    no_runtime: Annotated[
        bool,
        typer.Option("--no-runtime", help="do not look at live processes"),
    ] = False,
    proc: Annotated[
        Path | None,
        typer.Option(
            "--proc",
            help="the live processes' proc directory (default ROOT/proc, e.g. /host/proc)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Scan a host root (and the images of its containerd and Docker stores) and push the
    reports, every --interval, until stopped."""
    try:
        period = parse_interval(interval)
    except typer.BadParameter as e:
        usage_error(e.message, "--interval")
    try:
        labels = labels_from(label or [])
    except UsageError as e:
        raise fail(str(e), EXIT_USAGE) from e
    if runtime and no_runtime:
        usage_error("--runtime and --no-runtime exclude each other")
    if proc is not None and no_runtime:
        usage_error("--proc does not apply with --no-runtime")
    live = _runtime_default(root, True if runtime else False if no_runtime else None, proc)
    client, spool = _setup(server, token_file, spool_dir)
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        say(f"gpuprov agent: received signal {signum}, stopping")
        stop.set()

    if not once:
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
    code = EXIT_OK
    with client:
        while not stop.is_set():
            try:
                reports = (
                    _scan_node(root, live, proc) if images else [(root, _scan(root, live, proc))]
                )
            except ScannerError as e:
                error(f"scan of {root} failed: {e}")
                code = EXIT_REJECTED
            else:
                code = EXIT_OK
                for _what, report in reports:
                    pushed = (
                        EXIT_REJECTED
                        if report is None
                        else _push_once(client, spool, report, labels, Backoff(retries + 1))
                    )
                    code = max(code, pushed)
            if once:
                break
            stop.wait(period)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add `push` and `agent` to the `gpuprov` command line."""
    app.command("push", cls=StrictCommand)(push_command)
    app.command("agent", cls=StrictCommand)(agent_command)
