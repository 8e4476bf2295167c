"""The decision and the control statuses from rule results (scanner/policy/evaluate.py), on
results built here: every combination of statuses and actions, and the round trip of a result
through the gate JSON that the service stores and the CLI renders."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from scanner.policy.document import Action
from scanner.policy.evaluate import (
    Decision,
    Evaluation,
    RuleResult,
    control_status,
    decide,
    decision_json,
    evaluation_from_json,
)
from scanner.policy.rules import Status

PASS, FAIL, NA = Status.PASS, Status.FAIL, Status.NOT_APPLICABLE
SEVERITY = {NA: 0, PASS: 1, FAIL: 2}


def result(
    status: Status, action: Action = Action.DENY, controls: tuple[str, ...] = ("C",), **kw: Any
) -> RuleResult:
    return RuleResult(
        rule=kw.pop("rule", "integrity"),
        action=action,
        status=status,
        message=kw.pop("message", f"{status.value}"),
        files=kw.pop("files", ()),
        evidence=kw.pop("evidence", ()),
        controls=controls,
        **kw,
    )


@pytest.mark.parametrize(
    "statuses", [p for n in (1, 2, 3) for p in itertools.product((PASS, FAIL, NA), repeat=n)]
)
def test_a_control_takes_the_worst_status_of_the_rules_citing_it(
    statuses: tuple[Status, ...],
) -> None:
    # fail over pass over not applicable, in whatever order the rules come
    results = [result(s, controls=("C", f"only-{i}")) for i, s in enumerate(statuses)]
    worst = max(statuses, key=SEVERITY.__getitem__)
    expected = {"C": worst, **{f"only-{i}": s for i, s in enumerate(statuses)}}
    assert control_status(results) == dict(sorted(expected.items()))
    assert list(control_status(results)) == sorted(expected)


@pytest.mark.parametrize(
    ("outcomes", "decision"),
    [
        ((), Decision.ALLOW),
        (((PASS, Action.DENY), (NA, Action.DENY)), Decision.ALLOW),
        (((FAIL, Action.WARN),), Decision.WARN),
        (((FAIL, Action.WARN), (PASS, Action.DENY)), Decision.WARN),
        (((FAIL, Action.DENY),), Decision.DENY),
        (((FAIL, Action.WARN), (FAIL, Action.DENY)), Decision.DENY),
        (((FAIL, Action.DENY), (FAIL, Action.WARN)), Decision.DENY),
        # a rule that passes or does not apply decides nothing, whatever its action
        (((PASS, Action.DENY), (FAIL, Action.WARN), (NA, Action.DENY)), Decision.WARN),
    ],
)
def test_deny_wins_then_warn_then_allow(
    outcomes: tuple[tuple[Status, Action], ...], decision: Decision
) -> None:
    results = [result(s, a) for s, a in outcomes]
    assert decide(results) is decision
    evaluation = Evaluation(decision, tuple(results), control_status(results))
    assert evaluation.reasons == tuple(r for r in results if r.status is FAIL)


def test_a_result_survives_the_gate_json() -> None:
    files = ({"path": "/lib/libcudnn.so.9", "family": "cudnn", "version": "9.1.0", "sha256": None},)
    original = result(
        FAIL,
        Action.WARN,
        ("ID.RA-09", "CIS-2.6"),
        rule="provenance",
        message="no verdict",
        files=files,
        evidence=(("forbid", "modified"), ("signers", "release")),
        missing_input=True,
    )
    again = RuleResult.from_dict(original.to_dict())
    assert again == original
    assert (
        RuleResult.from_dict({**original.to_dict(), "missing_input": False}).missing_input is False
    )
    # what older answers left out reads as nothing, never as a failure input
    bare = RuleResult.from_dict({"rule": "x", "action": "deny", "status": "pass", "message": ""})
    assert (bare.files, bare.evidence, bare.controls, bare.missing_input) == ((), (), (), False)
    assert result(PASS).missing_input is False  # by default a result had its inputs


def test_an_evaluation_survives_the_gate_json() -> None:
    results = (result(FAIL, Action.WARN, ("A",)), result(PASS, Action.DENY, ("A", "B")))
    evaluation = Evaluation(decide(results), results, control_status(results))
    doc = decision_json(evaluation, {"name": "p", "version": "1"}, {"name": "x"})
    assert doc["decision"] == "warn" and doc["controls"] == {"A": "fail", "B": "pass"}
    assert [r["rule"] for r in doc["reasons"]] == ["integrity"]
    assert evaluation_from_json(doc) == evaluation


def test_results_and_evaluations_are_frozen() -> None:
    one = result(PASS)
    evaluation = Evaluation(Decision.ALLOW, (one,), {"C": PASS})
    for value, attribute in ((one, "status"), (evaluation, "decision")):
        with pytest.raises(AttributeError):
            setattr(value, attribute, FAIL)
    assert hash(one) == hash(result(PASS))
