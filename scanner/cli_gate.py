"""`gpuprov gate`: scan (or read a BOM) and decide locally whether the asset may be promoted.

The scan half is the `scan` command itself, run with every scan option the user gave and a
CycloneDX report as its output; the gate reads that report like any BOM. Exit codes: 0 allow
or warn, 1 deny, 2 error (bad policy, unreadable target or BOM, failed scan).
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer

from scanner.cli_common import fail, say, show_usage_error
from scanner.errors import ScannerError

if TYPE_CHECKING:  # the policy modules load only when the command runs
    from scanner.policy.controls import ControlsCatalog
    from scanner.policy.evaluate import Evaluation
    from scanner.policy.facts import AssetFacts

EXIT_ALLOW = 0
EXIT_DENY = 1
EXIT_ERROR = 2
#: `scan` options the gate owns or refuses: the decision is its only verdict and output.
_REFUSED = ("--format", "-f", "--output", "-o", "--fail-on", "--spec-version", "--wide")


class GateFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"
    JUNIT = "junit"


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise fail(f"cannot read {what} {path}: {e.strerror}", EXIT_ERROR) from None


def _scan_to_bom(ctx: click.Context, args: list[str]) -> bytes:
    """Run `gpuprov scan ARGS` into a temporary CycloneDX file and return its bytes."""
    refused = [a for a in args if a.split("=", 1)[0] in _REFUSED]
    if refused:
        raise fail(
            f"gate decides with its policy and writes its own --format/--output; "
            f"not a gate option: {refused[0]}",
            EXIT_ERROR,
        )
    # The scan command of the group this gate was registered in (no import of scanner.cli:
    # the CLI module registers the gate, never the other way round).
    root = ctx.find_root()
    group = root.command
    scan = group.get_command(root, "scan") if isinstance(group, click.Group) else None
    if scan is None:
        raise fail("this CLI has no scan command to gate a TARGET; give --bom FILE", EXIT_ERROR)
    with tempfile.TemporaryDirectory(prefix="gpuprov-gate-") as tmp:
        report = Path(tmp) / "scan.cdx.json"
        try:
            code = scan.main(
                [*args, "--format", "cyclonedx", "--output", str(report)],
                prog_name="gpuprov gate",
                standalone_mode=False,
            )
        except click.ClickException as e:
            show_usage_error(e)
            raise typer.Exit(EXIT_ERROR) from None
        if code not in (None, 0) or not report.exists():
            raise fail(f"the scan failed (exit {code}); no decision", EXIT_ERROR)
        return report.read_bytes()


def gate(
    ctx: typer.Context,
    policy_file: Annotated[
        Path, typer.Option("--policy-file", help="PromotionPolicy YAML (docs/policy.md).")
    ],
    bom: Annotated[
        Path | None,
        typer.Option("--bom", help="Gate this CycloneDX BOM (ours or another tool's); no scan."),
    ] = None,
    fmt: Annotated[
        GateFormat, typer.Option("--format", "-f", help="text, json, sarif or junit.")
    ] = GateFormat.TEXT,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the decision to FILE.")
    ] = None,
    baseline: Annotated[
        list[Path] | None,
        typer.Option(
            "--baseline",
            help="CycloneDX BOM of an asset of the parity rule's baseline (repeatable).",
        ),
    ] = None,
    policy_uri: Annotated[
        str | None,
        typer.Option("--policy-uri", help="URI of the policy named in SARIF and the VSA."),
    ] = None,
    vsa_key: Annotated[
        Path | None, typer.Option("--vsa-key", help="On allow, sign a VSA with this PEM key.")
    ] = None,
    vsa_out: Annotated[
        Path | None, typer.Option("--vsa-out", help="Where to write the signed VSA (DSSE).")
    ] = None,
) -> None:
    """Decide whether TARGET (scanned with any `gpuprov scan` option) or --bom FILE may be
    promoted under --policy-file. Exit 0 allow or warn, 1 deny, 2 error."""
    from scanner.policy.bom_facts import facts_from_bom
    from scanner.policy.controls import default_catalog
    from scanner.policy.document import load_policy
    from scanner.policy.evaluate import Decision, evaluate
    from scanner.policy.rules import baseline_of

    if (vsa_key is None) != (vsa_out is None):
        raise fail("give --vsa-key and --vsa-out together", EXIT_ERROR)
    scan_args = list(ctx.args)
    if (bom is None) == (not scan_args):
        raise fail("give a TARGET to scan (with any scan option) or --bom FILE", EXIT_ERROR)
    try:
        loaded = load_policy(_read(policy_file, "policy"))
        raw = _read(bom, "BOM") if bom is not None else _scan_to_bom(ctx, scan_args)
        facts = facts_from_bom(raw)
        rule = loaded.policy.rules.parity
        fleet = None
        if baseline and rule is not None:
            fleet = baseline_of(
                rule.label,
                rule.baseline,
                [facts_from_bom(_read(p, "baseline BOM")) for p in baseline],
            )
        catalog = default_catalog()
        now = datetime.now(UTC)
        evaluation = evaluate(facts, loaded.policy, catalog, now=now, baseline=fleet)
    except ScannerError as e:
        raise fail(str(e), EXIT_ERROR) from None
    uri = policy_uri or policy_file.name
    ref = loaded.ref()
    subject = facts.subject()
    text = _render(fmt, evaluation, ref, subject, catalog, uri)
    _write(text, output)
    if vsa_key is not None and vsa_out is not None:
        if evaluation.decision is not Decision.ALLOW:
            # a VSA says PASSED: only an allow earns it (a warn still names failing rules)
            say(f"no VSA: the decision is {evaluation.decision.value} ({vsa_out} not written)")
        else:
            _write_vsa(facts, loaded.policy.name, loaded.sha256, uri, vsa_key, vsa_out, now)
    if evaluation.decision is Decision.DENY:
        raise typer.Exit(EXIT_DENY)


def _render(
    fmt: GateFormat,
    evaluation: Evaluation,
    ref: dict[str, Any],
    subject: dict[str, Any],
    catalog: ControlsCatalog,
    uri: str,
) -> str:
    from scanner.policy import formats
    from scanner.terminal import printable

    if fmt is GateFormat.JSON:
        return formats.to_json(evaluation, ref, subject)
    if fmt is GateFormat.SARIF:
        return formats.to_sarif(evaluation, ref, subject, catalog, uri)
    if fmt is GateFormat.JUNIT:
        return formats.to_junit(evaluation, ref, subject)
    # target data (paths, names) reaches a terminal: escape control characters
    text = formats.to_text(evaluation, ref, subject)
    return "\n".join(printable(line) for line in text.split("\n"))


def _write_vsa(
    facts: AssetFacts, name: str, sha256: str, uri: str, key: Path, dest: Path, now: datetime
) -> None:
    from scanner.policy.vsa import sign_vsa, vsa_statement
    from scanner.verify.errors import Rejected

    try:
        statement = vsa_statement(
            facts, policy_uri=uri, policy_sha256=sha256, policy_name=name, time_verified=now
        )
        envelope = sign_vsa(statement, _read(key, "VSA key"))
    except Rejected as e:
        raise fail(f"no VSA: {e}", EXIT_ERROR) from None
    _write(envelope.to_json(), dest)
    say(f"VSA written to {dest}")


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    tmp = output.with_name(output.name + f".tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, output)
    except OSError as e:
        raise fail(f"cannot write {output}: {e.strerror}", EXIT_ERROR) from None


def register(app: typer.Typer) -> None:
    """Add `gpuprov gate` to the CLI; unknown options and TARGET go to the scan."""
    app.command(
        "gate",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        options_metavar="[OPTIONS] [TARGET [SCAN OPTIONS]]",
        epilog="TARGET is scanned with every `gpuprov scan` option given (see gpuprov scan "
        "--help), except --format, --output, --spec-version, --wide and --fail-on.",
    )(gate)
