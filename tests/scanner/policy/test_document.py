"""Policy documents: the issue's example loads; every error names its field path and why."""

from __future__ import annotations

import pytest

from scanner.policy.document import RULE_IDS, Action, PolicyError, load_policy

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
"""


def test_the_issue_example_loads_with_every_rule() -> None:
    loaded = load_policy(EXAMPLE)
    rules = loaded.policy.rules
    assert all(getattr(rules, r) is not None for r in RULE_IDS)
    assert rules.provenance is not None and rules.provenance.action is Action.WARN
    assert rules.integrity is not None and rules.integrity.action is Action.DENY  # default
    assert loaded.ref()["name"] == "prod" and len(loaded.sha256) == 64


def _error(text: str) -> str:
    head = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: p\n"
    with pytest.raises(PolicyError) as e:
        load_policy((head + text).encode())
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
