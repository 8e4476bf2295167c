"""Gate decision output formats: text, JSON, SARIF 2.1.0 and JUnit XML.

Pure renderers of an `Evaluation` (scanner/policy/evaluate.py); the CLI writes what they
return. SARIF carries one result per reason with the rule id and its control IDs in
``properties`` so code-scanning UIs show them; JUnit has one testcase per rule of the policy.
"""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

from scanner import __version__
from scanner.policy.controls import ControlsCatalog
from scanner.policy.evaluate import Evaluation, decision_json
from scanner.policy.rules import Status

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/gpuprov/gpuprov/blob/main/docs/policy.md"
_MARK = {Status.PASS: "pass", Status.FAIL: "FAIL", Status.NOT_APPLICABLE: "n/a "}


def to_json(evaluation: Evaluation, policy_ref: dict[str, Any], subject: dict[str, Any]) -> str:
    return json.dumps(decision_json(evaluation, policy_ref, subject), indent=2) + "\n"


def to_text(evaluation: Evaluation, policy_ref: dict[str, Any], subject: dict[str, Any]) -> str:
    lines = [
        f"decision: {evaluation.decision.value.upper()}",
        f"subject:  {subject.get('kind')} {subject.get('name')} {subject.get('digest') or '-'}",
        f"policy:   {policy_ref['name']} (sha256 {str(policy_ref['sha256'])[:12]})",
        "",
    ]
    for r in evaluation.results:
        action = f" ({r.action.value})" if r.status is Status.FAIL else ""
        lines.append(f"  {_MARK[r.status]}  {r.rule}{action}: {r.message}")
        lines.append(f"        controls: {', '.join(r.controls)}")
    return "\n".join(lines) + "\n"


def _uri(path: str) -> str:
    return path.lstrip("/") or "."


def to_sarif(
    evaluation: Evaluation,
    policy_ref: dict[str, Any],
    subject: dict[str, Any],
    catalog: ControlsCatalog,
    policy_uri: str,
) -> str:
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
                },
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def to_junit(evaluation: Evaluation, policy_ref: dict[str, Any], subject: dict[str, Any]) -> str:
    """One testcase per rule: deny failures fail, warn failures pass with a warning in
    system-out (the gate exits 0 on warn), not-applicable rules are skipped with why."""
    failures = sum(r.status is Status.FAIL and r.action.value == "deny" for r in evaluation.results)
    skipped = sum(r.status is Status.NOT_APPLICABLE for r in evaluation.results)
    suite = ET.Element(
        "testsuite",
        name=f"gpuprov gate {policy_ref['name']}: {subject.get('name')}",
        tests=str(len(evaluation.results)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="decision", value=evaluation.decision.value)
    ET.SubElement(props, "property", name="policy.sha256", value=str(policy_ref["sha256"]))
    for r in evaluation.results:
        case = ET.SubElement(
            suite, "testcase", classname=f"gpuprov.policy.{policy_ref['name']}", name=r.rule
        )
        detail = r.message + "\ncontrols: " + ", ".join(r.controls)
        if r.files:
            detail += "\n" + "\n".join(
                f"{f['path']} {f['family']} {f['version']} sha256:{f['sha256']}" for f in r.files
            )
        if r.status is Status.FAIL and r.action.value == "deny":
            failure = ET.SubElement(case, "failure", message=r.message, type="deny")
            failure.text = detail
        elif r.status is Status.FAIL:
            ET.SubElement(case, "system-out").text = "WARNING: " + detail
        elif r.status is Status.NOT_APPLICABLE:
            ET.SubElement(case, "skipped", message=r.message)
    root = ET.Element("testsuites", name="gpuprov gate")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
