"""The ``advisories`` rule on facts built here (scanner/policy/advisory_rule.py) and its settings'
refusals (scanner/policy/document.py): every edge of the decision, what each message and its
evidence name. The narrow file of mutation/modules.toml's ``policy-advisory-rule``; the real
bulletins are matched in tests/scanner/test_gate_advisories.py and tests/app/test_advisory_gate.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

import pytest

from scanner.model import AssetKind
from scanner.policy import document as D
from scanner.policy.advisory_rule import advisories, at_or_above, ignored
from scanner.policy.drivers import default_drivers
from scanner.policy.evaluate import evaluate
from scanner.policy.facts import AdvisoryFacts, AssetFacts, VulnerabilityFact
from scanner.policy.rules import Context, Outcome, Status

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
HEAD = {"apiVersion": "gpuprov.dev/v1", "kind": "PromotionPolicy", "name": "t"}


def v(cve: str, status: str = "affected", severity: str | None = "HIGH", **kw: Any):
    return VulnerabilityFact(cve=cve, status=status, severity=severity, product="driver", **kw)


def feed(*found: VulnerabilityFact, **kw: Any) -> AdvisoryFacts:
    return AdvisoryFacts(
        feed_at=kw.pop("feed_at", NOW - timedelta(hours=2)),
        documents=kw.pop("documents", 131),
        source=kw.pop("source", "files psirt"),
        findings=found,
        **kw,
    )


def facts(advisory: AdvisoryFacts | None) -> AssetFacts:
    return AssetFacts(AssetKind.HOST, "node-1", None, NOW, (), advisories=advisory)


def policy(settings: dict[str, Any]) -> D.PromotionPolicy:
    return D.validate_policy({**HEAD, "rules": {"advisories": settings}})


def run(settings: dict[str, Any], advisory: AdvisoryFacts | None, now: datetime = NOW) -> Outcome:
    rule = policy(settings).rules.advisories
    assert rule is not None
    return advisories(rule, Context(facts(advisory), now, default_drivers()))


def ev(outcome: Outcome) -> dict[str, str]:
    return dict(outcome.evidence)


HIGH = {"min_severity": "high"}


# -- the feed -----------------------------------------------------------------------------------


def test_no_feed_at_all_is_a_missing_input() -> None:
    out = run(HIGH, None)
    assert (out.status, out.missing_input) == (Status.FAIL, True)
    assert "no advisory feed was given" in out.message and "--advisories PATH" in out.message


@pytest.mark.parametrize(("documents", "at"), [(0, NOW), (5, None)])
def test_an_empty_feed_is_a_missing_input(documents: int, at: datetime | None) -> None:
    out = run(HIGH, feed(documents=documents, feed_at=at))
    assert (out.status, out.missing_input) == (Status.FAIL, True)
    assert out.message == "the advisory feed (files psirt) holds no document"


def test_findings_matched_against_an_older_feed_are_a_missing_input() -> None:
    out = run(HIGH, feed(stale="matched against the feed of yesterday"))
    assert (out.status, out.missing_input) == (Status.FAIL, True)
    assert out.message == "matched against the feed of yesterday"
    assert ev(out)["feed_documents"] == "131"


@pytest.mark.parametrize("hours", [2.0, 2.01, 1.99, 1.9995])
def test_a_feed_older_than_its_limit_is_a_missing_input(hours: float) -> None:
    # the feed is exactly 2 h old: the limit is exceeded only strictly
    out = run({**HIGH, "max_feed_age_hours": hours}, feed())
    if hours < 2.0:  # 2.0: exactly its age, not older
        assert (out.status, out.missing_input) == (Status.FAIL, True)
        assert out.message.startswith("the advisory feed (files psirt) is 2.0 h old (last read ")
        assert f"more than max_feed_age_hours {hours:g}" in out.message
        assert ev(out)["feed_at"] == (NOW - timedelta(hours=2)).isoformat()
    else:
        assert out.status is Status.PASS


def test_the_feed_is_as_old_as_its_last_reading_not_its_last_change() -> None:
    """A scheduled sync that finds nothing new reads the feed: it is fresh from then on."""
    rule = {**HIGH, "max_feed_age_hours": 1}
    old = NOW - timedelta(days=30)
    fresh = run(rule, feed(feed_at=old, checked_at=NOW - timedelta(minutes=5)))
    assert fresh.status is Status.PASS
    stale = run(rule, feed(feed_at=old, checked_at=NOW - timedelta(hours=3)))
    assert (stale.status, stale.missing_input) == (Status.FAIL, True)
    assert "3.0 h old" in stale.message


def test_without_an_age_limit_an_old_feed_still_counts() -> None:
    out = run(HIGH, feed(feed_at=NOW - timedelta(days=3650)))
    assert out.status is Status.PASS


# -- affected findings --------------------------------------------------------------------------


def test_no_finding_passes_and_names_the_feed() -> None:
    out = run(HIGH, feed())
    assert out.status is Status.PASS and not out.missing_input
    assert out.message == (
        "no known vulnerability at or above high affects the asset (131 advisory documents "
        "from files psirt)"
    )
    assert ev(out) == {
        "feed": "files psirt",
        "feed_documents": "131",
        "feed_at": (NOW - timedelta(hours=2)).isoformat(),
        "min_severity": "high",
    }


def test_an_affected_finding_at_the_severity_fails() -> None:
    found = v("CVE-2025-23280", installed="535.129.03")
    out = run(HIGH, feed(found))
    assert (out.status, out.missing_input) == (Status.FAIL, False)
    assert out.message == (
        "1 known vulnerability at or above high affects the asset: "
        "CVE-2025-23280 (high, driver 535.129.03)"
    )
    assert ev(out)["affected"] == "CVE-2025-23280"


@pytest.mark.parametrize(
    ("minimum", "severity", "counts"),
    [
        ("low", "LOW", True),
        ("low", "NONE", False),
        ("medium", "LOW", False),
        ("medium", "MEDIUM", True),
        ("high", "MEDIUM", False),
        ("high", "HIGH", True),
        ("high", "CRITICAL", True),
        ("critical", "HIGH", False),
        ("critical", "CRITICAL", True),
        ("critical", "critical", True),
        ("critical", None, True),  # unknown: counted, never waved through
        ("critical", "SEVERE", True),
    ],
)
def test_the_severity_threshold(minimum: str, severity: str | None, counts: bool) -> None:
    assert at_or_above(severity, D.Severity(minimum)) is counts
    out = run({"min_severity": minimum}, feed(v("CVE-2025-1", severity=severity)))
    assert out.status is (Status.FAIL if counts else Status.PASS)


def test_every_cve_is_named_once_then_counted() -> None:
    found = [v(f"CVE-2025-{n}", installed="1") for n in range(1, 8)]
    found.append(v("CVE-2025-1", installed="1"))  # a second product of one CVE
    out = run(HIGH, feed(*found))
    assert out.message.startswith("7 known vulnerabilities at or above high affect the asset: ")
    pending = [v(f"CVE-2025-{n}", status="under_investigation") for n in (1, 2)]
    assert "2 vulnerabilities at or above high are under" in run(HIGH, feed(*pending)).message
    assert out.message.endswith("CVE-2025-5 (high, driver 1) and 2 more"), out.message
    assert ev(out)["affected"] == ",".join(sorted(f"CVE-2025-{n}" for n in range(1, 8)))


def test_a_component_and_an_unknown_severity_are_named() -> None:
    found = VulnerabilityFact(
        "CVE-2023-0193", "affected", None, "cuda-toolkit", "cuobjdump", "11.8.86"
    )
    out = run(HIGH, feed(found))
    assert "CVE-2023-0193 (severity unknown, cuda-toolkit/cuobjdump 11.8.86)" in out.message


@pytest.mark.parametrize("status", ["not_affected", "fixed"])
def test_answers_other_than_affected_pass(status: str) -> None:
    out = run(HIGH, feed(v("CVE-2025-1", status=status)))
    assert out.status is Status.PASS


# -- under investigation ------------------------------------------------------------------------


def test_under_investigation_at_the_severity_is_a_missing_input() -> None:
    out = run(HIGH, feed(v("CVE-2025-9", status="under_investigation")))
    assert (out.status, out.missing_input) == (Status.FAIL, True)
    assert out.message == (
        "1 vulnerability at or above high is under investigation by the vendor (not known to "
        "be safe): CVE-2025-9 (high, driver)"
    )
    assert ev(out)["under_investigation"] == "CVE-2025-9"


def test_under_investigation_below_the_severity_passes() -> None:
    out = run(HIGH, feed(v("CVE-2025-9", status="under_investigation", severity="LOW")))
    assert out.status is Status.PASS


def test_affected_and_under_investigation_fail_as_affected() -> None:
    out = run(HIGH, feed(v("CVE-2025-1"), v("CVE-2025-9", status="under_investigation")))
    assert out.message.startswith("1 known vulnerability at or above high affects the asset")
    assert (out.status, out.missing_input) == (Status.FAIL, False)
    assert out.message.endswith("; 1 more under investigation by the vendor")


def test_an_ignore_covers_under_investigation_too() -> None:
    ignore = [{"cve": "CVE-2025-9", "reason": "r", "expires": "2027-01-01"}]
    out = run({**HIGH, "ignore": ignore}, feed(v("CVE-2025-9", status="under_investigation")))
    assert out.status is Status.PASS


# -- ignores ------------------------------------------------------------------------------------


def test_an_ignore_in_force_takes_a_finding_out_and_says_so() -> None:
    ignore = [{"cve": "CVE-2025-1", "reason": "accepted", "expires": "2026-12-08"}]
    out = run({**HIGH, "ignore": ignore}, feed(v("CVE-2025-1")))
    assert out.status is Status.PASS
    assert out.message.endswith("; 1 ignored by the policy")
    assert ev(out)["ignored"] == "CVE-2025-1"


def test_an_expired_ignore_no_longer_applies() -> None:
    # expires: a date is 00:00 UTC that day; at that instant the ignore is over
    ignore = [{"cve": "CVE-2025-1", "reason": "accepted", "expires": "2026-12-07T12:00:00Z"}]
    out = run({**HIGH, "ignore": ignore}, feed(v("CVE-2025-1")))
    assert out.status is Status.FAIL
    assert ev(out)["ignores_expired"] == "CVE-2025-1" and "ignored" not in ev(out)
    before = run({**HIGH, "ignore": ignore}, feed(v("CVE-2025-1")), NOW - timedelta(seconds=1))
    assert before.status is Status.PASS


def test_ignored_splits_the_entries_by_now() -> None:
    rule = policy(
        {
            **HIGH,
            "ignore": [
                {"cve": "CVE-1-1", "reason": "a", "expires": "2027-01-01"},
                {"cve": "CVE-1-2", "reason": "b", "expires": "2026-01-01"},
            ],
        }
    ).rules.advisories
    assert rule is not None
    assert ignored(rule, NOW) == ({"CVE-1-1": "a"}, ["CVE-1-2"])


def test_an_ignore_of_another_cve_changes_nothing() -> None:
    ignore = [{"cve": "CVE-2025-2", "reason": "accepted", "expires": "2027-01-01"}]
    out = run({**HIGH, "ignore": ignore}, feed(v("CVE-2025-1")))
    assert out.status is Status.FAIL and "ignored" not in ev(out)


# -- analyses -----------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["not_affected", "fixed"])
def test_a_trusted_analysis_clears_an_affected_finding(state: str) -> None:
    found = v(
        "CVE-2025-1",
        analysis_state=state,
        analysis_author="sec@example.com",
        analysis_reason="component_not_present",
    )
    out = run(HIGH, feed(found))
    assert out.status is Status.PASS
    assert ev(out)["analysed"] == (
        f"CVE-2025-1: {state} by sec@example.com (component_not_present)"
    )


def test_a_trusted_analysis_can_make_a_finding_affected() -> None:
    found = v("CVE-2025-1", status="not_affected", analysis_state="affected")
    assert run(HIGH, feed(found)).status is Status.FAIL


def test_an_analysis_under_investigation_never_passes() -> None:
    found = v("CVE-2025-1", analysis_state="under_investigation")
    out = run(HIGH, feed(found))
    assert (out.status, out.missing_input) == (Status.FAIL, True)


def test_a_finding_without_analysis_keeps_its_status() -> None:
    assert v("CVE-1-1").effective == "affected"
    assert v("CVE-1-1", analysis_state="fixed").effective == "fixed"


# -- require_fix_available ----------------------------------------------------------------------


def test_require_fix_available_fails_only_where_a_fix_exists() -> None:
    fixable = v("CVE-2025-1", fix_available=True)
    unfixed = v("CVE-2025-2", fix_available=False)
    settings = {**HIGH, "require_fix_available": True}
    out = run(settings, feed(fixable, unfixed))
    assert out.status is Status.FAIL
    assert out.message.startswith("1 known vulnerability at or above high affects the asset: ")
    assert out.message.endswith(
        "; 1 affected without a fix (require_fix_available): CVE-2025-2 (high, driver)"
    )
    assert ev(out)["affected"] == "CVE-2025-1"
    assert ev(out)["affected_without_fix"] == "CVE-2025-2"
    only = run(settings, feed(unfixed))
    assert only.status is Status.PASS and "affected without a fix" in only.message
    assert run(HIGH, feed(unfixed)).status is Status.FAIL  # the default counts it


# -- the catalog and evaluation -----------------------------------------------------------------


def test_evaluation_cites_the_rules_controls() -> None:
    evaluation = evaluate(facts(feed(v("CVE-2025-1"))), policy(HIGH), now=NOW)
    (result,) = evaluation.results
    assert result.rule == "advisories" and result.status is Status.FAIL
    assert result.controls == ("ID.RA-01", "ID.RA-08", "PR.PS-02", "CIS-7.5", "CIS-7.7")
    assert evaluation.decision.value == "deny"
    warn = evaluate(facts(feed(v("CVE-2025-1"))), policy({**HIGH, "action": "warn"}), now=NOW)
    assert warn.decision.value == "warn"


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({}, "rules.advisories.min_severity: required field is missing"),
        ({"min_severity": "severe"}, "rules.advisories.min_severity: Input should be 'low'"),
        ({"min_severity": "HIGH"}, "rules.advisories.min_severity"),
        ({**HIGH, "ignore": [{"cve": "CVE-2025-1", "reason": "r"}]}, "expires: required"),
        ({**HIGH, "ignore": [{"cve": "CVE-2025-1", "expires": "2027-01-01"}]}, "reason: required"),
        (
            {**HIGH, "ignore": [{"cve": "CVE-2025-1", "reason": "  ", "expires": "2027-01-01"}]},
            "name the reason the risk is accepted",
        ),
        (
            {**HIGH, "ignore": [{"cve": "CVE-2025-1", "reason": "", "expires": "2027-01-01"}]},
            "ignore[0].reason: String should have at least 1 character",
        ),
        (
            {**HIGH, "ignore": [{"cve": "cve 1", "reason": "r", "expires": "2027-01-01"}]},
            "is not an advisory id",
        ),
        (
            {**HIGH, "ignore": [{"cve": "CVE-2025-1", "reason": "r", "expires": "soon"}]},
            "'soon' is not a date (2027-01-31)",
        ),
        (
            {**HIGH, "ignore": [{"cve": "CVE-2025-1", "reason": "r", "expires": 20270101}]},
            "must be a date (2027-01-31)",
        ),
        (
            {
                **HIGH,
                "ignore": [{"cve": "CVE-2025-1", "reason": "r", "expires": "2027-01-01T00:00:00"}],
            },
            "give the expiry's time zone",
        ),
        (
            {
                **HIGH,
                "ignore": [
                    {"cve": "CVE-2025-1", "reason": "r", "expires": "2027-01-01"},
                    {"cve": "CVE-2025-1", "reason": "s", "expires": "2027-02-01"},
                ],
            },
            "CVE-2025-1 is ignored twice",
        ),
        (
            {
                **HIGH,
                "ignore": [{"cve": "CVE-1-1", "reason": "r", "expires": "2027-01-01", "x": 1}],
            },
            "ignore[0].x: unknown field",
        ),
        ({**HIGH, "require_fix_available": "yes"}, "require_fix_available: Input should be"),
        ({**HIGH, "require_fix_available": 1}, "require_fix_available: Input should be"),
        ({**HIGH, "max_feed_age_hours": 0}, "max_feed_age_hours: Input should be greater"),
        ({**HIGH, "max_feed_age_hours": -1}, "max_feed_age_hours: Input should be greater"),
        ({**HIGH, "max_feed_age_hours": 876000.5}, "max_feed_age_hours: Input should be less"),
        ({**HIGH, "max_feed_age_hours": True}, "max_feed_age_hours: Input should be"),
        ({**HIGH, "max_feed_age_hours": "24"}, "max_feed_age_hours: Input should be"),
        ({**HIGH, "action": "block"}, "rules.advisories.action: Input should be 'deny' or"),
        ({**HIGH, "feeds": []}, "rules.advisories.feeds: unknown field"),
    ],
)
def test_refused_settings_name_the_field(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(D.PolicyError) as e:
        policy(settings)
    assert error in str(e.value), str(e.value)


def test_accepted_settings_and_defaults() -> None:
    rule = policy(HIGH).rules.advisories
    assert rule is not None
    assert (rule.ignore, rule.require_fix_available, rule.max_feed_age_hours) == ([], False, None)
    assert rule.action is D.Action.DENY
    full = policy(
        {
            "min_severity": "critical",
            "ignore": [
                {
                    "cve": "GHSA-abcd-efgh-ijkl",
                    "reason": "r",
                    "expires": "2027-01-01T12:00:00+02:00",
                }
            ],
            "require_fix_available": True,
            "max_feed_age_hours": 876000,
        }
    ).rules.advisories
    assert full is not None
    assert full.ignore[0].expires == datetime(2027, 1, 1, 10, tzinfo=UTC)
    assert full.min_severity is D.Severity.CRITICAL


def test_a_yaml_date_is_an_expiry_at_midnight_utc() -> None:
    text = (
        b"apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: p\nrules:\n"
        b"  advisories:\n    min_severity: low\n"
        b"    ignore: [{cve: CVE-2025-1, reason: r, expires: 2027-01-31}]\n"
    )
    rule = D.load_policy(text).policy.rules.advisories
    assert rule is not None and rule.ignore[0].expires == datetime(2027, 1, 31, tzinfo=UTC)
    aware = text.replace(b"2027-01-31", b"2027-01-31 06:00:00+01:00")
    rule = D.load_policy(aware).policy.rules.advisories
    assert rule is not None and rule.ignore[0].expires == datetime(2027, 1, 31, 5, tzinfo=UTC)
    naive = text.replace(b"2027-01-31", b"2027-01-31 06:00:00")
    with pytest.raises(D.PolicyError, match="give the expiry's time zone"):
        D.load_policy(naive)


# -- what the mutation run asked for ------------------------------------------------------------


def _fresh(text: str) -> str:
    """``text`` as a new str object: statuses read from a database or JSON are not the
    interned literals of the code, so an identity test would miss them."""
    return "".join(list(text))


def test_statuses_are_compared_by_value_not_identity() -> None:
    literal = "affected"
    affected = v("CVE-2025-1", status=_fresh(literal))
    assert affected.status == literal and affected.status is not literal
    assert run(HIGH, feed(affected)).status is Status.FAIL
    pending = v("CVE-2025-2", status=_fresh("under_investigation"))
    assert run(HIGH, feed(pending)).missing_input
    cleared = v(
        "CVE-2025-3",
        status=_fresh("affected"),
        analysis_state=_fresh("fixed"),
        analysis_author="a",
        analysis_reason="rebuilt",
    )
    assert ev(run(HIGH, feed(cleared)))["analysed"] == "CVE-2025-3: fixed by a (rebuilt)"


def test_only_an_affected_finding_cleared_by_an_analysis_is_listed_as_analysed() -> None:
    plain = run(HIGH, feed(v("CVE-2025-1")))
    assert "analysed" not in ev(plain)
    confirmed = v("CVE-2025-2", status="not_affected", analysis_state="fixed", analysis_author="a")
    assert "analysed" not in ev(run(HIGH, feed(confirmed)))


@pytest.mark.parametrize(
    ("count", "tail"),
    [(5, "CVE-2025-5 (high, driver)"), (8, " and 3 more"), (11, " and 6 more")],
)
def test_five_cves_are_named_then_the_rest_counted(count: int, tail: str) -> None:
    out = run(HIGH, feed(*(v(f"CVE-2025-{n}") for n in range(1, count + 1))))
    assert out.message.endswith(tail), out.message


@pytest.mark.parametrize(("limit", "fails"), [(2.4, True), (2.6, False), (2.4995, True)])
def test_the_feed_age_is_in_hours_with_their_fractions(limit: float, fails: bool) -> None:
    # a feed 2.5 h old: 9000 s / 3600
    out = run({**HIGH, "max_feed_age_hours": limit}, feed(feed_at=NOW - timedelta(hours=2.5)))
    assert (out.status is Status.FAIL) is fails


# -- the settings' bounds (mutation run of policy-document, issue 17 §5) -------------------------


def _ignore(**entry: Any) -> dict[str, Any]:
    return {
        **HIGH,
        "ignore": [{"cve": "CVE-2025-1", "reason": "r", "expires": "2027-01-01", **entry}],
    }


@pytest.mark.parametrize(("length", "accepted"), [(64, True), (65, False)])
def test_an_advisory_id_is_at_most_64_characters(length: int, accepted: bool) -> None:
    cve = "GHSA-" + "a" * (length - 5)
    if accepted:
        rule = policy(_ignore(cve=cve)).rules.advisories
        assert rule is not None and rule.ignore[0].cve == cve
    else:
        with pytest.raises(D.PolicyError, match="at most 64 characters"):
            policy(_ignore(cve=cve))


def test_a_refused_id_is_quoted_to_80_characters() -> None:
    bad = "x" * 79 + "yz"  # a lowercase start: no advisory id
    with pytest.raises(D.PolicyError) as e:
        policy(_ignore(cve=bad[:64]))
    assert repr(bad[:64]) + " is not an advisory id" in str(e.value)
    with pytest.raises(ValueError) as raw:
        D._check_advisory_id(bad)
    assert str(raw.value).startswith(repr(bad[:80]) + " is not an advisory id")


@pytest.mark.parametrize(("length", "accepted"), [(1024, True), (1025, False)])
def test_a_reason_is_at_most_1024_characters(length: int, accepted: bool) -> None:
    if accepted:
        rule = policy(_ignore(reason="r" * length)).rules.advisories
        assert rule is not None and len(rule.ignore[0].reason) == length
    else:
        with pytest.raises(D.PolicyError, match="at most 1024 characters"):
            policy(_ignore(reason="r" * length))


@pytest.mark.parametrize(("count", "accepted"), [(1000, True), (1001, False)])
def test_at_most_1000_ignores(count: int, accepted: bool) -> None:
    entries = [
        {"cve": f"CVE-2025-{i}", "reason": "r", "expires": "2027-01-01"} for i in range(count)
    ]
    if accepted:
        rule = policy({**HIGH, "ignore": entries}).rules.advisories
        assert rule is not None and len(rule.ignore) == count
    else:
        with pytest.raises(D.PolicyError, match="at most 1000 items"):
            policy({**HIGH, "ignore": entries})


@pytest.mark.parametrize(
    ("text", "expires"),
    [
        ("2027-01-31", datetime(2027, 1, 31, tzinfo=UTC)),  # a date as a JSON string
        ("2027-01-31T12:00:00Z", datetime(2027, 1, 31, 12, tzinfo=UTC)),
        ("2027-01-31T12:00:00+02:00", datetime(2027, 1, 31, 10, tzinfo=UTC)),
    ],
)
def test_expiry_strings_of_a_date_or_a_zoned_time(text: str, expires: datetime) -> None:
    rule = policy(_ignore(expires=text)).rules.advisories
    assert rule is not None and rule.ignore[0].expires == expires


def test_a_refused_expiry_is_quoted_to_40_characters() -> None:
    bad = "n" * 39 + "op"
    with pytest.raises(D.PolicyError) as e:
        policy(_ignore(expires=bad))
    assert repr(bad[:40]) + " is not a date (2027-01-31)" in str(e.value)


class _NoOffset(tzinfo):
    """A time zone that knows no offset (Python allows it): the time is still not placed."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return "?"

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None


def test_an_expiry_whose_zone_gives_no_offset_is_refused() -> None:
    with pytest.raises(ValueError, match="give the expiry's time zone"):
        D.AdvisoryIgnore(
            cve="CVE-2025-1", reason="r", expires=datetime(2027, 1, 1, tzinfo=_NoOffset())
        )


def test_an_ignore_entry_cannot_be_changed() -> None:
    rule = policy(_ignore()).rules.advisories
    assert rule is not None
    with pytest.raises(ValueError, match="frozen"):
        rule.ignore[0].reason = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(("hours", "accepted"), [(0.5, True), (float("inf"), False)])
def test_a_feed_age_limit_is_a_finite_positive_number(hours: float, accepted: bool) -> None:
    if accepted:
        rule = policy({**HIGH, "max_feed_age_hours": hours}).rules.advisories
        assert rule is not None and rule.max_feed_age_hours == hours
    else:
        with pytest.raises(D.PolicyError, match="max_feed_age_hours"):
            policy({**HIGH, "max_feed_age_hours": hours})


# -- the facts the rule reads (mutation run of policy-facts) ------------------------------------


def test_a_finding_judged_by_its_trusted_analysis_else_its_status() -> None:
    assert v("CVE-2025-1").effective == "affected"
    assert v("CVE-2025-1", analysis_state="not_affected").effective == "not_affected"
    assert v("CVE-2025-1", status="fixed").effective == "fixed"


def test_findings_and_feeds_cannot_be_changed() -> None:
    finding, advisory = v("CVE-2025-1"), feed()
    with pytest.raises(AttributeError):
        finding.status = "fixed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        advisory.documents = 0  # type: ignore[misc]


def test_a_basic_format_date_string_is_no_date() -> None:
    """Only the extended form 2027-01-31 is read as a date; 20270131 would be a time without
    its zone, refused rather than guessed."""
    with pytest.raises(D.PolicyError, match="give the expiry's time zone"):
        policy(_ignore(expires="20270131"))


def test_a_feed_age_limit_that_is_not_a_number_is_named_so() -> None:
    with pytest.raises(D.PolicyError, match="finite number"):
        policy({**HIGH, "max_feed_age_hours": float("nan")})


def test_a_finding_has_no_fix_unless_the_vendor_names_one() -> None:
    assert v("CVE-2025-1").fix_available is False
