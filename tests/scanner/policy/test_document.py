"""Policy documents: the issue's example loads; every error names its field path and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from scanner.model import AssetKind
from scanner.policy.document import (
    MAX_SCAN_AGE_HOURS,
    RULE_IDS,
    Action,
    Forbidden,
    LoadedKind,
    PolicyError,
    load_policy,
)
from scanner.policy.drivers import default_drivers
from scanner.policy.evaluate import Status
from scanner.policy.facts import AssetFacts
from scanner.policy.rules import Context, scan_age

HEAD = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: p\n"

EXAMPLE = b"""\
apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: prod
rules:
  integrity:    {forbid: [modified]}
  ownership:    {allow_unowned: ["/opt/vendor/**"]}
  provenance:   {require: verified, signers: [nvidia-catalog], action: warn}
  versions:     {allow: {cudnn: ">=9.1,<10"}, deny: {cudnn: ["9.0.*"]}, minimum: {cudart: "12.2"}}
  cuda_pairing: {}
  mixed_cudnn:  {}
  duplicates:   {}
  driver:       {}
  loaded:       {forbid: [loaded-deleted, loaded-differs-from-disk]}
  image_signature: {signers: [release-ci]}
  slsa:         {min_level: 2}
  scan_age:     {max_hours: 24}
  parity:       {label: env, baseline: staging, target: prod, action: warn}
  advisories:
    min_severity: high
    ignore: [{cve: CVE-2023-0193, reason: "cuobjdump never runs", expires: 2027-06-30}]
    require_fix_available: false
    max_feed_age_hours: 168
"""


def test_the_issue_example_loads_with_every_rule() -> None:
    loaded = load_policy(EXAMPLE)
    rules = loaded.policy.rules
    assert all(getattr(rules, r) is not None for r in RULE_IDS)
    assert rules.provenance is not None and rules.provenance.action is Action.WARN
    assert rules.integrity is not None and rules.integrity.action is Action.DENY  # default
    assert loaded.ref()["name"] == "prod" and len(loaded.sha256) == 64


def _error(text: str) -> str:
    with pytest.raises(PolicyError) as e:
        load_policy((HEAD + text).encode())
    return str(e.value)


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("rules: {integrity: {forbid: [modifed]}}", "rules.integrity.forbid[0]: Input should be"),
        ("rules: {integrity: {acton: deny}}", "rules.integrity.acton: unknown field"),
        ("rules: {integrity: {action: block}}", "rules.integrity.action: Input should be"),
        ("rules: {signature: {}}", "rules.signature: unknown field"),
        ("rules: {versions: {allow: {cudnnn: '9'}}}", "rules.versions.allow.cudnnn: unknown"),
        ("rules: {versions: {deny: {cudnn: ['>=x']}}}", "rules.versions.deny.cudnn[0]: 'x' is"),
        ("rules: {versions: {minimum: {cudart: '>=12'}}}", "rules.versions.minimum.cudart"),
        ("rules: {slsa: {min_level: 7}}", "rules.slsa.min_level: Input should be less"),
        ("rules: {scan_age: {}}", "rules.scan_age.max_hours: required field is missing"),
        ("rules: {ownership: {allow_unowned: [opt/**]}}", "rules.ownership.allow_unowned"),
        ("rules: {parity: {label: env, target: prod}}", "rules.parity.baseline: required"),
        ("", "rules: required field is missing"),
    ],
)
def test_errors_name_the_field_path(rules: str, expected: str) -> None:
    assert expected in _error(rules)


def test_wrong_kind_and_version_and_non_mapping() -> None:
    with pytest.raises(PolicyError, match="apiVersion"):
        load_policy(b"apiVersion: v2\nkind: PromotionPolicy\nname: p\nrules: {}\n")
    with pytest.raises(PolicyError, match="must be a mapping"):
        load_policy(b"- a\n- b\n")
    with pytest.raises(PolicyError, match="not YAML"):
        load_policy(b"rules: [\n")


@pytest.mark.parametrize(
    "value", ["100000000", "1e11", "1e300", ".inf", "-.inf", ".nan", "0", "-1", "true", "'24'"]
)
def test_scan_age_is_a_number_the_date_arithmetic_can_hold(value: str) -> None:
    """Stored with 201, 1e300 hours made every compliance read a 500 (OverflowError)."""
    assert "rules.scan_age.max_hours: " in _error(f"rules: {{scan_age: {{max_hours: {value}}}}}")


@given(st.floats() | st.integers(-(10**40), 10**40))
def test_every_scan_age_a_policy_accepts_can_be_judged(value: float) -> None:
    try:
        # as YAML writes the number: `1e-05` (repr) is a string to YAML 1.1, `1.0e-05` a float
        number = yaml.safe_dump(value).removesuffix("...\n").strip()
        loaded = load_policy(f"{HEAD}rules: {{scan_age: {{max_hours: {number}}}}}\n".encode())
    except PolicyError:
        assert not 0 < value <= MAX_SCAN_AGE_HOURS
        return
    rule = loaded.policy.rules.scan_age
    assert rule is not None and 0 < value <= MAX_SCAN_AGE_HOURS
    now = datetime.now(UTC)
    # the service's cutoff (app.domain.compliance) and the rule itself, scanned long ago
    assert now - timedelta(hours=rule.max_hours) > datetime.min.replace(tzinfo=UTC)
    facts = AssetFacts(AssetKind.HOST, "h", None, datetime(1, 1, 1, tzinfo=UTC), ())
    assert scan_age(rule, Context(facts, now, default_drivers())).status is Status.FAIL


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (HEAD + "rules: {slsa: {min_level: " + "9" * 5000 + "}}\n", "5000 digits"),
        ("[" * 50_000 + "]" * 50_000, "nesting"),
        (HEAD + "rules:\n  integrity: {}\nname: other\n", "duplicate key 'name'"),
        (HEAD + "rules: {integrity: {}, integrity: {action: warn}}\n", "duplicate key"),
        ("a: &a [1, *a]\n", "refers to a node that contains it"),
    ],
)
def test_hostile_yaml_is_a_policy_error(document: str, reason: str) -> None:
    """A 5,000-digit integer or 50,000-deep nesting escaped as ValueError / RecursionError
    (a 500 in the service, a traceback and exit 1 in `gpuprov gate`)."""
    with pytest.raises(PolicyError, match="policy is not YAML") as raised:
        load_policy(document.encode())
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("rules", "refused"),
    [
        # each bound on both sides: the last value accepted and the first refused
        ("{slsa: {min_level: 1}}", False),
        ("{slsa: {min_level: 0}}", True),
        ("{slsa: {min_level: 3}}", False),
        ("{slsa: {min_level: 4}}", True),
        ("{slsa: {min_level: '2'}}", True),  # strictly a number
        ("{slsa: {min_level: 2.0}}", True),
        ("{slsa: {min_level: true}}", True),
        ("{scan_age: {max_hours: 876000}}", False),  # a hundred years
        ("{scan_age: {max_hours: 876000.5}}", True),
        ("{scan_age: {max_hours: 0.01}}", False),
        ("{scan_age: {max_hours: 0}}", True),
        ("{scan_age: {max_hours: -1}}", True),
        ("{integrity: {forbid: [modified]}}", False),
        ("{integrity: {forbid: []}}", True),
        ("{loaded: {forbid: [loaded-unowned]}}", False),
        ("{loaded: {forbid: []}}", True),
        ("{parity: {label: e, baseline: s, target: p}}", False),
        ("{parity: {label: '', baseline: s, target: p}}", True),
        ("{parity: {label: e, baseline: '', target: p}}", True),
        ("{parity: {label: e, baseline: s, target: ''}}", True),
        ("{versions: {minimum: {cudart: '12.2'}}}", False),
        ("{versions: {minimum: {cudart: '=12.2'}}}", True),
        ("{versions: {minimum: {cudart: '>12.2'}}}", True),  # an expression, though it parses
        ("{versions: {minimum: {cudart: '==12.2'}}}", True),
        ("{versions: {minimum: {cudart: '<12'}}}", True),
        ("{versions: {minimum: {cudart: '12.*'}}}", True),
        ("{versions: {minimum: {cudart: ' >=12'}}}", True),
        ("{ownership: {allow_unowned: ['/opt/**']}}", False),
        ("{ownership: {allow_unowned: ['']}}", True),
        ("{provenance: {signers: ['']}}", True),
        ("{image_signature: {signers: ['']}}", True),
    ],
)
def test_the_bounds_of_each_setting(rules: str, refused: bool) -> None:
    text = (HEAD + f"rules: {rules}\n").encode()
    if refused:
        with pytest.raises(PolicyError, match="invalid policy: rules"):
            load_policy(text)
    else:
        load_policy(text)


@pytest.mark.parametrize(
    ("name", "refused"),
    [("p", False), ("a" * 128, False), ("a" * 129, True), ("", True), ("-p", True)],
)
def test_the_bounds_of_a_policy_name(name: str, refused: bool) -> None:
    text = f"apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: '{name}'\nrules: {{}}\n"
    if refused:
        with pytest.raises(PolicyError, match="name"):
            load_policy(text.encode())
    else:
        assert load_policy(text.encode()).policy.name == name


def test_defaults_of_the_settings() -> None:
    rules = load_policy(
        (HEAD + "rules: {integrity: {}, loaded: {}, slsa: {}, driver: {}}\n").encode()
    ).policy.rules
    assert rules.integrity is not None and rules.integrity.forbid == [Forbidden.MODIFIED]
    assert rules.loaded is not None and rules.loaded.forbid == list(LoadedKind)
    assert rules.slsa is not None and rules.slsa.min_level == 1
    assert rules.driver is not None and rules.driver.minor_version_compatibility is True
    off = load_policy((HEAD + "rules: {driver: {minor_version_compatibility: false}}\n").encode())
    assert off.policy.rules.driver is not None
    assert off.policy.rules.driver.minor_version_compatibility is False


def test_a_loaded_policy_cannot_be_changed() -> None:
    # the service caches loaded policies: nothing may alter one after validation
    loaded = load_policy(EXAMPLE)
    rules = loaded.policy.rules
    assert rules.slsa is not None
    for value, attribute, new in (
        (loaded, "sha256", "0" * 64),
        (loaded.policy, "name", "other"),
        (rules, "slsa", None),
        (rules.slsa, "min_level", 1),
    ):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(value, attribute, new)
