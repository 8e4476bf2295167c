"""Gate decision output formats: text, JSON, SARIF 2.1.0 and JUnit XML.

Pure renderers of an `Evaluation` (scanner/policy/evaluate.py); the CLI writes what they
return. SARIF carries one result per reason with the rule id and its control IDs in
``properties`` so code-scanning UIs show them; JUnit has one testcase per rule of the policy.
Paths, names and messages come from the gated BOM: each format escapes them its own way (JSON
escapes, URIs percent-encoded, XML without the characters XML 1.0 forbids, text printable).
``record``: the service's audit record of a remote decision (``decision_id``, ``decided_at``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree as ET

from scanner import __version__
from scanner.policy.controls import ControlsCatalog
from scanner.policy.evaluate import Evaluation, decision_json
from scanner.policy.rules import Status
from scanner.terminal import printable

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/gpuprov/gpuprov/blob/main/docs/policy.md"
_MARK = {Status.PASS: "pass", Status.FAIL: "FAIL", Status.NOT_APPLICABLE: "n/a "}
#: what XML 1.0 (section 2.2, Char) cannot hold, and CR, which a parser reads back as LF
_NOT_XML = re.compile("[^\t\n\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _record(record: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: record[k] for k in ("decision_id", "decided_at")} if record else {}


def to_json(evaluation: Evaluation, policy_ref: dict[str, Any], subject: dict[str, Any]) -> str:
    """The decision JSON (`decision_json`); strings escaped by the json module."""
    return json.dumps(decision_json(evaluation, policy_ref, subject), indent=2) + "\n"


def to_text(
    evaluation: Evaluation,
    policy_ref: dict[str, Any],
    subject: dict[str, Any],
    record: Mapping[str, Any] | None = None,
) -> str:
    """Lines for a terminal: every value from the BOM printable, so a newline or an escape
    sequence in a path or a name can neither forge a line nor reach the terminal."""
    p = printable
    lines = [
        f"decision: {evaluation.decision.value.upper()}",
        f"subject:  {p(subject.get('kind'))} {p(subject.get('name'))} "
        f"{p(subject.get('digest') or '-')}",
        f"policy:   {p(policy_ref['name'])} (sha256 {p(str(policy_ref['sha256'])[:12])})",
    ]
    if record:
        lines.append(f"record:   {p(record['decision_id'])} at {p(record['decided_at'])}")
    lines.append("")
    for r in evaluation.results:
        action = f" ({r.action.value})" if r.status is Status.FAIL else ""
        lines.append(f"  {_MARK[r.status]}  {p(r.rule)}{action}: {p(r.message)}")
        lines.append(f"        controls: {p(', '.join(r.controls))}")
    return "\n".join(lines) + "\n"


def _uri(path: str) -> str:
    """A file's path as a URI reference relative to the TARGET base (RFC 3986): every byte but
    unreserved characters and "/" percent-encoded (a space, "#", "?", "%" or ":" in a name would
    make another URI or none). An undecodable byte of a name (a surrogate escape) is that byte."""
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file name decodes to: its UTF-8 form
        raw = path.encode("utf-8", "surrogatepass")
    return quote(raw.lstrip(b"/"), safe="/") or "."


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _xml(value: object) -> str:
    """``value`` as XML 1.0 text: a character no XML document may hold (C0 controls, lone
    surrogates, U+FFFE, U+FFFF) and CR are written as escapes (``\\x01``, ``\\ufffe``)."""
    return _NOT_XML.sub(_escape, str(value))


def _field(value: object) -> str:
    """A value from the BOM in a JUnit report: one line (newlines escaped, as on a terminal),
    XML-safe."""
    return _xml(printable(value))


def to_sarif(
    evaluation: Evaluation,
    policy_ref: dict[str, Any],
    subject: dict[str, Any],
    catalog: ControlsCatalog,
    policy_uri: str,
    record: Mapping[str, Any] | None = None,
) -> str:
    """SARIF 2.1.0: one result per reason, located at its files (``uri`` percent-encoded,
    relative to the TARGET base) or at ``policy_uri`` (a URI reference)."""
    rules = [
        {
            "id": r.rule,
            "name": r.rule.replace("_", "-"),
            "shortDescription": {"text": f"gpuprov promotion rule {r.rule}"},
            "helpUri": f"{INFO_URI}#{r.rule.replace('_', '-')}",
            "properties": {
                "controls": list(r.controls),
                "tags": [f"{c} {catalog.controls[c].title}" for c in r.controls],
            },
        }
        for r in evaluation.results
    ]
    index = {r.rule: n for n, r in enumerate(evaluation.results)}
    results = []
    for r in evaluation.reasons:
        locations = [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(str(f["path"])), "uriBaseId": "TARGET"}
                },
                "message": {"text": f"{f['family']} {f['version'] or '(version unknown)'}"},
            }
            for f in r.files
        ] or [{"physicalLocation": {"artifactLocation": {"uri": policy_uri}}}]
        results.append(
            {
                "ruleId": r.rule,
                "ruleIndex": index[r.rule],
                "level": "error" if r.action.value == "deny" else "warning",
                "message": {"text": r.message},
                "locations": locations,
                "properties": {
                    "action": r.action.value,
                    "controls": list(r.controls),
                    "missingInput": r.missing_input,
                    "evidence": dict(r.evidence),
                    "sha256": [f["sha256"] for f in r.files if f["sha256"]],
                },
            }
        )
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpuprov",
                        "version": __version__,
                        "informationUri": INFO_URI,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {
                    "TARGET": {"description": {"text": f"root of {subject.get('name')}"}}
                },
                "results": results,
                "properties": {
                    "decision": evaluation.decision.value,
                    "policy": policy_ref,
                    "subject": subject,
                    "controls": {c: s.value for c, s in evaluation.controls.items()},
                    **_record(record),
                },
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def to_junit(
    evaluation: Evaluation,
    policy_ref: dict[str, Any],
    subject: dict[str, Any],
    record: Mapping[str, Any] | None = None,
) -> str:
    """One testcase per rule: deny failures fail, warn failures pass with a warning in
    system-out (the gate exits 0 on warn), not-applicable rules are skipped with why. Every
    value from the BOM is XML-safe (`_field`): the report stays well-formed whatever a path
    holds."""
    f = _field
    failures = sum(r.status is Status.FAIL and r.action.value == "deny" for r in evaluation.results)
    skipped = sum(r.status is Status.NOT_APPLICABLE for r in evaluation.results)
    suite = ET.Element(
        "testsuite",
        name=f"gpuprov gate {f(policy_ref['name'])}: {f(subject.get('name'))}",
        tests=str(len(evaluation.results)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="decision", value=evaluation.decision.value)
    ET.SubElement(props, "property", name="policy.sha256", value=f(policy_ref["sha256"]))
    for key, value in _record(record).items():
        ET.SubElement(props, "property", name=key, value=f(value))
    for r in evaluation.results:
        case = ET.SubElement(
            suite, "testcase", classname=f"gpuprov.policy.{f(policy_ref['name'])}", name=f(r.rule)
        )
        detail = f(r.message) + "\ncontrols: " + f(", ".join(r.controls))
        if r.files:
            detail += "\n" + "\n".join(
                f(f"{x['path']} {x['family']} {x['version']} sha256:{x['sha256']}") for x in r.files
            )
        if r.status is Status.FAIL and r.action.value == "deny":
            failure = ET.SubElement(case, "failure", message=f(r.message), type="deny")
            failure.text = detail
        elif r.status is Status.FAIL:
            ET.SubElement(case, "system-out").text = "WARNING: " + detail
        elif r.status is Status.NOT_APPLICABLE:
            ET.SubElement(case, "skipped", message=f(r.message))
    root = ET.Element("testsuites", name="gpuprov gate")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
