"""`gpuprov gate`: scan (or read a BOM) and decide locally whether the asset may be promoted.

The scan half is the `scan` command itself, run with every scan option the user gave and a
CycloneDX report as its output; the gate reads that report like any BOM. Exit codes: 0 allow
or warn, 1 deny, 2 error (bad policy, unreadable target or BOM, failed scan).
"""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple
from urllib.parse import quote, urlencode, urlsplit

import click
import typer

from scanner.cli_common import fail, say, show_usage_error, write_output
from scanner.errors import ScannerError

if TYPE_CHECKING:  # the policy modules load only when the command runs
    from scanner.policy.controls import ControlsCatalog
    from scanner.policy.document import PromotionPolicy
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


#: the largest BOM, policy or key file the gate reads (a BOM of a large image is tens of MB)
MAX_INPUT_BYTES = 1 << 30


def _read(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise fail(f"cannot read {what} {path}: {e.strerror}", EXIT_ERROR) from None
    if len(data) > MAX_INPUT_BYTES:
        raise fail(f"{what} {path} is larger than {MAX_INPUT_BYTES} bytes", EXIT_ERROR)
    return data


#: the characters of an RFC 3986 URI reference, "%" only as a percent-encoded octet, and "[ ]"
#: only around an IP literal host (checked apart)
_URI_REFERENCE = re.compile(r"(?:[A-Za-z0-9\-._~:/?#@!$&'()*+,;=\[\]]|%[0-9A-Fa-f]{2})*")


def _is_uri_reference(value: str) -> bool:
    """Whether ``value`` is a URI reference as SARIF and the VSA's ``policy.uri`` need it."""
    if not _URI_REFERENCE.fullmatch(value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:  # a bracket that opens no IP literal host
        return False
    return not re.search(r"[\[\]]", parts.path + parts.query + parts.fragment)


def _target_or_bom(bom: Path | None, scan_args: list[str]) -> None:
    """Exactly one of a TARGET (with scan options) and --bom FILE, said as what to change."""
    if bom is None and not scan_args:
        raise fail("give a TARGET to scan (with any scan option) or --bom FILE", EXIT_ERROR)
    if bom is not None and scan_args:
        raise fail(
            f"--bom FILE is gated as it is, without a scan: drop the TARGET and scan options "
            f"({' '.join(scan_args)}), or drop --bom to scan the TARGET",
            EXIT_ERROR,
        )


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
        Path | None,
        typer.Option("--policy-file", help="PromotionPolicy YAML (docs/policy.md): decide here."),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy", help="Name of a policy stored in the service: the service decides."
        ),
    ] = None,
    server: Annotated[
        str | None, typer.Option("--server", help="Service URL for --policy ($GPUPROV_SERVER).")
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="Token (gate and report:write) for --policy."),
    ] = None,
    oidc: Annotated[
        bool,
        typer.Option(
            "--oidc",
            help="For --policy: authenticate with this CI job's OIDC ID token (GitHub Actions, "
            "GitLab CI), not a stored token (docs/ci.md).",
        ),
    ] = False,
    oidc_audience: Annotated[
        str | None,
        typer.Option("--oidc-audience", help="The service's CI audience ($GPUPROV_CI_AUDIENCE)."),
    ] = None,
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
    advisories: Annotated[
        list[Path] | None,
        typer.Option(
            "--advisories",
            help="Advisory documents (CSAF 2.0, OSV, CVE Records) or a directory of them, as "
            "for `gpuprov advisories import` (repeatable): the advisories rule's feed.",
        ),
    ] = None,
) -> None:
    """Decide whether TARGET (scanned with any `gpuprov scan` option) or --bom FILE may be
    promoted under --policy-file, or ask the service under its stored --policy NAME.
    Exit 0 allow or warn, 1 deny, 2 error."""
    if policy_file is not None and policy is not None:
        raise fail(
            "--policy-file FILE (decide here) and --policy NAME (the service decides) exclude "
            "each other: give one",
            EXIT_ERROR,
        )
    if policy_file is None and policy is None:
        raise fail(
            "give --policy-file FILE (decide here) or --policy NAME with --server (the service "
            "decides)",
            EXIT_ERROR,
        )
    if (oidc or oidc_audience) and policy is None:
        raise fail("--oidc applies to --policy NAME (the service decides)", EXIT_ERROR)
    if oidc and token_file is not None:
        raise fail("--oidc and --token-file exclude each other: give one", EXIT_ERROR)
    if oidc_audience and not oidc:
        raise fail("--oidc-audience applies with --oidc", EXIT_ERROR)
    if policy is not None:
        local = {
            "--baseline": bool(baseline),
            "--vsa-key": vsa_key,
            "--policy-uri": policy_uri,
            "--advisories": bool(advisories),
        }
        given = [name for name, value in local.items() if value]
        if given:
            raise fail(
                f"{given[0]} applies to --policy-file only (the service decides)", EXIT_ERROR
            )
        identity = _Identity(token_file, oidc, oidc_audience)
        _remote(ctx, policy, bom, server, identity, fmt, output, vsa_out)
        return
    push = [
        *(["--server", server] if server is not None else []),
        *(["--token-file", str(token_file)] if token_file is not None else []),
    ]
    if push and "--push" not in ctx.args:
        raise fail(
            "--server and --token-file apply to --policy NAME, or to the scan's --push",
            EXIT_ERROR,
        )
    _local(
        ctx,
        policy_file,
        bom,
        fmt,
        output,
        baseline,
        policy_uri,
        vsa_key,
        vsa_out,
        push,
        advisories or [],
    )


def _with_feed(
    facts: AssetFacts, raw: bytes, policy: PromotionPolicy, paths: list[Path]
) -> AssetFacts:
    """The facts with the advisory findings of the feed under ``paths``, matched here; without
    paths, said out loud: the advisories rule then fails for want of a feed."""
    from msgspec.structs import replace

    from scanner.model import AssetKind
    from scanner.policy.advisory_feed import advisory_facts, products_of_bom, read_feed
    from scanner.policy.bom_facts import reading

    if policy.rules.advisories is None:
        if paths:
            say("the policy has no advisories rule: --advisories is not used")
        return facts
    if not paths:
        # scanner never reads the service's database (GPUPROV_DATABASE_URL): a feed is files
        say("the advisories rule has no feed (give --advisories PATH): it fails as a missing input")
        return facts
    feed = read_feed(paths)
    doc, _ = reading(raw)
    asset = products_of_bom(doc, [f.family for f in facts.files], host=facts.kind is AssetKind.HOST)
    return replace(facts, advisories=advisory_facts(asset, feed))


def _local(
    ctx: typer.Context,
    policy_file: Path | None,
    bom: Path | None,
    fmt: GateFormat,
    output: Path | None,
    baseline: list[Path] | None,
    policy_uri: str | None,
    vsa_key: Path | None,
    vsa_out: Path | None,
    push: list[str],
    advisories: list[Path],
) -> None:
    """Scan (or read the BOM) and evaluate the policy file here; ``push``: the --server and
    --token-file the gate took, for the scan's --push."""
    from scanner.policy.bom_facts import facts_from_bom
    from scanner.policy.controls import default_catalog
    from scanner.policy.document import load_policy
    from scanner.policy.evaluate import Decision, evaluate
    from scanner.policy.rules import baseline_of

    if (vsa_key is None) != (vsa_out is None):
        raise fail("give --vsa-key and --vsa-out together", EXIT_ERROR)
    if policy_uri is not None and not _is_uri_reference(policy_uri):
        raise fail(
            f"--policy-uri {policy_uri!r} is not a URI (RFC 3986): percent-encode spaces and "
            "other characters (a space is %20)",
            EXIT_ERROR,
        )
    scan_args = list(ctx.args)
    _target_or_bom(bom, scan_args)
    assert policy_file is not None
    try:
        loaded = load_policy(_read(policy_file, "policy"))
        raw = _read(bom, "BOM") if bom is not None else _scan_to_bom(ctx, [*scan_args, *push])
        facts = _with_feed(facts_from_bom(raw), raw, loaded.policy, advisories)
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
    uri = policy_uri or quote(policy_file.name, safe="")
    ref = loaded.ref()
    subject = facts.subject()
    text = _render(fmt, evaluation, ref, subject, catalog, uri)
    write_output(text, output)
    if vsa_key is not None and vsa_out is not None:
        if evaluation.decision is not Decision.ALLOW:
            # a VSA says PASSED: only an allow earns it (a warn still names failing rules)
            say(f"no VSA: the decision is {evaluation.decision.value} ({vsa_out} not written)")
        else:
            _write_vsa(facts, loaded.policy.name, loaded.sha256, uri, vsa_key, vsa_out, now)
    if evaluation.decision is Decision.DENY:
        raise typer.Exit(EXIT_DENY)


class _Identity(NamedTuple):
    """How the gate authenticates to the service: a stored token's file, or the CI job's
    OIDC ID token for an audience."""

    token_file: Path | None
    oidc: bool
    audience: str | None


def _remote(
    ctx: typer.Context,
    policy: str,
    bom: Path | None,
    server: str | None,
    identity: _Identity,
    fmt: GateFormat,
    output: Path | None,
    vsa_out: Path | None,
) -> None:
    """Scan (or read the BOM), send it to the service's gate (which stores it, then decides
    under its stored policy) and render the service's answer in any gate format."""
    from scanner.ci_identity import audience_of, ci_id_token
    from scanner.deliver import Target, check_report
    from scanner.policy.controls import default_catalog
    from scanner.policy.evaluate import Decision, evaluation_from_json

    scan_args = list(ctx.args)
    _target_or_bom(bom, scan_args)
    try:
        # the address (and the audience) checked before the scan; the CI job's ID token asked
        # for after it, as it lives for minutes
        pending = "" if not identity.oidc else audience_of(identity.audience)
        target = Target.resolve(server, identity.token_file, token=pending or None)
        raw = _read(bom, "BOM") if bom is not None else _scan_to_bom(ctx, scan_args)
        if identity.oidc:
            target = Target(target.server, ci_id_token(identity.audience), target.timeout)
        check_report(raw)
        answer = _ask(target, policy, raw)
        evaluation = evaluation_from_json(answer)
        ref = dict(answer["policy"])
        subject = dict(answer["subject"])
        record = _record_of(answer)
    except ScannerError as e:
        raise fail(str(e), EXIT_ERROR) from None
    except (KeyError, TypeError, ValueError) as e:
        raise fail(f"the service's answer is not a gate decision: {e!r}", EXIT_ERROR) from None
    uri = f"{target.server}/api/v1/policies/{quote(policy, safe='')}?" + urlencode(
        {"version": ref.get("version")}
    )
    if fmt is GateFormat.JSON:  # the service's answer as it came: the decision and its record
        text = json.dumps(answer, indent=2) + "\n"
    else:
        text = _render(fmt, evaluation, ref, subject, default_catalog(), uri, record)
    write_output(text, output)
    if vsa_out is not None:
        if answer.get("vsa"):
            write_output(json.dumps(answer["vsa"], indent=2) + "\n", vsa_out)
            say(f"VSA written to {vsa_out}")
        else:
            why = answer.get("vsa_error") or (
                f"the decision is {evaluation.decision.value}"
                if evaluation.decision is not Decision.ALLOW
                else "the service signs no VSA (GPUPROV_VSA_KEY_FILE unset)"
            )
            say(f"no VSA: {why} ({vsa_out} not written)")
    if evaluation.decision is Decision.DENY:
        raise typer.Exit(EXIT_DENY)


def _record_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The service's audit record of its decision: ``decision_id`` and ``decided_at``."""
    decision_id, decided_at = answer["decision_id"], answer["decided_at"]
    if type(decision_id) is not int or not isinstance(decided_at, str):
        raise ValueError(f"decision_id {decision_id!r}, decided_at {decided_at!r}")
    return {"decision_id": decision_id, "decided_at": decided_at}


def _ask(target: Any, policy: str, bom: bytes) -> dict[str, Any]:
    """POST the BOM to the service's gate; the decision JSON, or a ScannerError saying why not."""
    import httpx

    # the BOM's bytes as they are (check_report parsed them): nothing is re-encoded
    body = b'{"policy": ' + json.dumps(policy).encode() + b', "bom": ' + bom + b"}"
    try:
        response = httpx.post(
            f"{target.server}/api/v1/gate",
            content=body,
            headers={
                "Authorization": f"Bearer {target.token}",
                "Content-Type": "application/json",
                "User-Agent": "gpuprov-gate",
            },
            timeout=max(target.timeout, 120.0),
        )
    except httpx.HTTPError as e:
        raise ScannerError(f"cannot reach the service at {target.server}: {e}") from None
    try:
        doc = response.json()
    except ValueError:
        doc = None
    if response.status_code != 200:
        message = (
            doc.get("error", {}).get("message")
            if isinstance(doc, dict) and isinstance(doc.get("error"), dict)
            else response.text[:200]
        )
        raise ScannerError(f"the service refused the gate ({response.status_code}): {message}")
    if not isinstance(doc, dict):
        raise ScannerError("the service's answer is not JSON")
    return doc


def _render(
    fmt: GateFormat,
    evaluation: Evaluation,
    ref: dict[str, Any],
    subject: dict[str, Any],
    catalog: ControlsCatalog,
    uri: str,
    record: dict[str, Any] | None = None,
) -> str:
    """The decision in ``fmt``; ``record``: the service's audit record of a remote decision."""
    from scanner.policy import formats

    if fmt is GateFormat.JSON:
        return formats.to_json(evaluation, ref, subject)
    if fmt is GateFormat.SARIF:
        return formats.to_sarif(evaluation, ref, subject, catalog, uri, record)
    if fmt is GateFormat.JUNIT:
        return formats.to_junit(evaluation, ref, subject, record)
    return formats.to_text(evaluation, ref, subject, record)


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
    write_output(envelope.to_json(), dest)
    say(f"VSA written to {dest}")


def register(app: typer.Typer) -> None:
    """Add `gpuprov gate` to the CLI; unknown options and TARGET go to the scan."""
    app.command(
        "gate",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        options_metavar="[OPTIONS] [TARGET [SCAN OPTIONS]]",
        epilog="TARGET is scanned with every `gpuprov scan` option given (see gpuprov scan "
        "--help), except --format, --output, --spec-version, --wide and --fail-on.",
    )(gate)
