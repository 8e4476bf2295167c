"""The ``advisories`` rule: (rule settings, context) -> Outcome over the asset's advisory
findings (scanner/policy/facts.py ``AdvisoryFacts``), as the other rules of rules.py.

Fail safe throughout: no feed, a feed older than ``max_feed_age_hours``, findings matched
against an older feed, and an ``under_investigation`` answer at or above ``min_severity`` are
missing inputs (the rule fails); a finding whose severity the feed does not give counts as at
or above any ``min_severity``. Only an ignore entry in force or a trusted analysis in force
(``not_affected`` / ``fixed``, always with a named reason) takes an ``affected`` finding out.
"""

from __future__ import annotations

from datetime import datetime

from scanner.policy import document as D
from scanner.policy.facts import AdvisoryFacts, VulnerabilityFact
from scanner.policy.rules import Context, Outcome, Status
from scanner.wording import counted

#: CVSS qualitative ratings, lowest first ("NONE" is CVSS's 0.0)
_RANK = {"NONE": 0, "LOW": 1, "MEDIUM": 2, "HIGH": 3, "CRITICAL": 4}
#: how many CVEs a message names before "and N more"
_NAMED = 5


def at_or_above(severity: str | None, minimum: D.Severity) -> bool:
    """Whether a finding's severity reaches ``minimum``; an unknown one always does."""
    rank = _RANK.get((severity or "").upper())
    return rank is None or rank >= _RANK[minimum.value.upper()]


def ignored(rule: D.AdvisoriesRule, now: datetime) -> tuple[dict[str, str], list[str]]:
    """The ignore entries in force (CVE -> reason) and the CVEs whose entry has expired."""
    active: dict[str, str] = {}
    expired: list[str] = []
    for entry in rule.ignore:
        if entry.expires > now:
            active[entry.cve] = entry.reason
        else:
            expired.append(entry.cve)
    return active, expired


def _named(findings: list[VulnerabilityFact]) -> str:
    items = list(
        dict.fromkeys(
            f"{f.cve} ({(f.severity or 'severity unknown').lower()}, {f.product}"
            + (f"/{f.component}" if f.component else "")
            + (f" {f.installed}" if f.installed else "")
            + ")"
            for f in findings
        )
    )
    more = f" and {len(items) - _NAMED} more" if len(items) > _NAMED else ""
    return ", ".join(items[:_NAMED]) + more


def _cves(findings: list[VulnerabilityFact]) -> str:
    return ",".join(sorted({f.cve for f in findings}))


def _feed_problem(rule: D.AdvisoriesRule, feed: AdvisoryFacts, now: datetime) -> str | None:
    if feed.documents == 0 or feed.feed_at is None:
        return f"the advisory feed ({feed.source}) holds no document"
    if feed.stale is not None:
        return feed.stale
    if rule.max_feed_age_hours is not None:
        checked = feed.checked_at or feed.feed_at
        hours = (now - checked).total_seconds() / 3600
        if hours > rule.max_feed_age_hours:
            return (
                f"the advisory feed ({feed.source}) is {hours:.1f} h old (last read "
                f"{checked.isoformat()}), more than max_feed_age_hours "
                f"{rule.max_feed_age_hours:g}: import the feed again"
            )
    return None


def advisories(rule: D.AdvisoriesRule, ctx: Context) -> Outcome:
    """Fail on an affected finding at or above ``min_severity`` that no ignore entry and no
    trusted analysis in force covers (docs/policy.md, ``advisories``)."""
    feed = ctx.facts.advisories
    if feed is None:
        return _missing(
            "no advisory feed was given, so known vulnerabilities cannot be checked: give "
            "`gpuprov gate --advisories PATH`, or gate in the service after "
            "`gpuprov advisories import`"
        )
    feed_ev = {
        "feed": feed.source,
        "feed_documents": str(feed.documents),
        "feed_at": feed.feed_at.isoformat() if feed.feed_at else None,
    }
    problem = _feed_problem(rule, feed, ctx.now)
    if problem is not None:
        return _missing(problem, feed_ev)
    active, expired = ignored(rule, ctx.now)
    relevant = [f for f in feed.findings if at_or_above(f.severity, rule.min_severity)]
    affected = [f for f in relevant if f.effective == "affected"]
    waived = [f for f in affected if f.cve in active]
    counted = [f for f in affected if f.cve not in active]
    unfixed = [f for f in counted if not f.fix_available] if rule.require_fix_available else []
    failing = [f for f in counted if f not in unfixed]
    pending = [f for f in relevant if f.effective == "under_investigation" and f.cve not in active]
    cleared = [
        f for f in relevant if f.status == "affected" and f.effective in ("not_affected", "fixed")
    ]
    evidence = {
        **feed_ev,
        "min_severity": rule.min_severity.value,
        "affected": _cves(failing) or None,
        "under_investigation": _cves(pending) or None,
        "ignored": _cves(waived) or None,
        "ignores_expired": ",".join(sorted(expired)) or None,
        "analysed": (
            "; ".join(
                sorted(
                    {
                        f"{f.cve}: {f.effective} by {f.analysis_author} ({f.analysis_reason})"
                        for f in cleared
                    }
                )
            )
            or None
        ),
        "affected_without_fix": _cves(unfixed) or None,
    }
    tail = ""
    if waived:
        tail += f"; {len({f.cve for f in waived})} ignored by the policy"
    if unfixed:
        tail += (
            f"; {len({f.cve for f in unfixed})} affected without a fix "
            f"(require_fix_available): {_named(unfixed)}"
        )
    if failing:
        return Outcome(
            Status.FAIL,
            f"{_count(failing, 'known vulnerability')} at or above "
            f"{rule.min_severity.value} {_verb(failing, 'affects', 'affect')} the asset: "
            f"{_named(failing)}"
            + (f"; {len(pending)} more under investigation by the vendor" if pending else "")
            + tail,
            evidence=_ev(evidence),
        )
    if pending:
        return _missing(
            f"{_count(pending, 'vulnerability')} at or above {rule.min_severity.value} "
            f"{_verb(pending, 'is', 'are')} under investigation by the vendor (not known to be "
            f"safe): {_named(pending)}" + tail,
            evidence,
        )
    return Outcome(
        Status.PASS,
        f"no known vulnerability at or above {rule.min_severity.value} affects the asset "
        f"({feed.documents} advisory documents from {feed.source})" + tail,
        evidence=_ev(evidence),
    )


def _count(findings: list[VulnerabilityFact], noun: str) -> str:
    many = noun.removesuffix("vulnerability") + "vulnerabilities"
    return counted(len({f.cve for f in findings}), noun, many)


def _verb(findings: list[VulnerabilityFact], one: str, many: str) -> str:
    return one if len({f.cve for f in findings}) == 1 else many


def _ev(evidence: dict[str, str | None]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in evidence.items() if v is not None)


def _missing(message: str, evidence: dict[str, str | None] | None = None) -> Outcome:
    return Outcome(Status.FAIL, message, evidence=_ev(evidence or {}), missing_input=True)
