"""Evaluation: (asset facts, policy, controls) -> a decision with reasons and control status.

One pure function, used by `gpuprov gate` and by the service. The decision is deny when a
failing rule's action is deny, warn when only warn rules fail, else allow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from msgspec import Struct

from scanner.policy import advisory_rule
from scanner.policy.controls import ControlsCatalog, default_catalog
from scanner.policy.document import RULE_IDS, Action, PromotionPolicy
from scanner.policy.drivers import DriverTable, default_drivers
from scanner.policy.facts import AssetFacts
from scanner.policy.rules import RULES, Context, FleetBaseline, Outcome, Status

#: Rule id -> its function, for every id of RULE_IDS: rules.py's, and the rules kept in modules
#: of their own
RULE_FUNCTIONS: dict[str, Callable[[Any, Context], Outcome]] = {
    **RULES,
    "advisories": advisory_rule.advisories,
}


class Decision(StrEnum):
    ALLOW = "allow"
    WARN = "warn"
    DENY = "deny"


class RuleResult(Struct, frozen=True):
    rule: str
    action: Action
    status: Status
    message: str
    files: tuple[dict[str, str | None], ...]
    evidence: tuple[tuple[str, str], ...]
    controls: tuple[str, ...]
    missing_input: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RuleResult:
        """A result as `to_dict` wrote it (the service's stored results, its gate answer)."""
        return cls(
            rule=str(d["rule"]),
            action=Action(d["action"]),
            status=Status(d["status"]),
            message=str(d["message"]),
            files=tuple(d.get("files") or ()),
            evidence=tuple((d.get("evidence") or {}).items()),
            controls=tuple(d.get("controls") or ()),
            missing_input=bool(d.get("missing_input")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "action": self.action.value,
            "status": self.status.value,
            "message": self.message,
            "missing_input": self.missing_input,
            "files": list(self.files),
            "evidence": dict(self.evidence),
            "controls": list(self.controls),
        }


class Evaluation(Struct, frozen=True):
    decision: Decision
    results: tuple[RuleResult, ...]  # one per rule the policy sets, in RULE_IDS order
    controls: dict[str, Status]  # every control a rule of the policy cites

    @property
    def reasons(self) -> tuple[RuleResult, ...]:
        """The failing rules: why the decision is not allow (or what it warns about)."""
        return tuple(r for r in self.results if r.status is Status.FAIL)


def evaluate(
    facts: AssetFacts,
    policy: PromotionPolicy,
    controls: ControlsCatalog | None = None,
    *,
    now: datetime | None = None,
    baseline: FleetBaseline | None = None,
    drivers: DriverTable | None = None,
) -> Evaluation:
    """Evaluate every rule the policy sets against one asset's facts."""
    catalog = controls or default_catalog()
    ctx = Context(facts, now or datetime.now(UTC), drivers or default_drivers(), baseline)
    slsa_rule = policy.rules.slsa
    results = []
    for rule_id in RULE_IDS:
        settings = getattr(policy.rules, rule_id)
        if settings is None:
            continue
        outcome = RULE_FUNCTIONS[rule_id](settings, ctx)
        cited = catalog.for_rule(rule_id, slsa_rule.min_level if slsa_rule else None)
        results.append(
            RuleResult(
                rule=rule_id,
                action=settings.action,
                status=outcome.status,
                message=outcome.message,
                files=tuple(f.summary() for f in outcome.files),
                evidence=outcome.evidence,
                controls=cited,
                missing_input=outcome.missing_input,
            )
        )
    return Evaluation(decide(results), tuple(results), control_status(results))


def decide(results: Sequence[RuleResult]) -> Decision:
    """deny when a failing rule's action is deny, warn when only warn rules fail, else allow."""
    failed = [r for r in results if r.status is Status.FAIL]
    if any(r.action is Action.DENY for r in failed):
        return Decision.DENY
    return Decision.WARN if failed else Decision.ALLOW


def evaluation_from_json(doc: Mapping[str, Any]) -> Evaluation:
    """The evaluation a gate JSON answer (`decision_json`) describes, for the output formats."""
    results = tuple(RuleResult.from_dict(r) for r in doc["rules"])
    return Evaluation(
        Decision(doc["decision"]),
        results,
        {cid: Status(s) for cid, s in dict(doc["controls"]).items()},
    )


def control_status(results: Sequence[RuleResult]) -> dict[str, Status]:
    """Per control: fail if any citing rule fails, pass if one passes, else not_applicable."""
    status: dict[str, Status] = {}
    rank = {Status.NOT_APPLICABLE: 0, Status.PASS: 1, Status.FAIL: 2}
    for r in results:
        for cid in r.controls:
            if cid not in status or rank[r.status] > rank[status[cid]]:
                status[cid] = r.status
    return dict(sorted(status.items()))


def decision_json(
    evaluation: Evaluation, policy_ref: dict[str, Any], subject: dict[str, Any]
) -> dict[str, Any]:
    """The gate's JSON answer (the CLI's --format json and the service's POST /gate)."""
    return {
        "decision": evaluation.decision.value,
        "policy": policy_ref,
        "subject": subject,
        "reasons": [r.to_dict() for r in evaluation.reasons],
        "rules": [r.to_dict() for r in evaluation.results],
        "controls": {cid: s.value for cid, s in evaluation.controls.items()},
    }
