"""The controls catalog (SLSA v1.2 Build, CIS Controls v8, NIST CSF 2.0) and rule mappings.

Loaded from packaged data (data/controls.yaml) and checked at load: every rule's control
exists, no control is cited twice, and the two widely published wrong mappings (CSF 2.0
PR.DS-10 is data-in-use, PR.PS-03 is hardware) can never be cited.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from msgspec import Struct

from scanner.loaders import DocumentError, load_yaml
from scanner.policy.document import RULE_IDS, PolicyError

#: Controls that must never be cited for software integrity or configuration.
FORBIDDEN_CONTROLS = frozenset({"PR.DS-10", "PR.PS-03"})


class Framework(Struct, frozen=True):
    id: str  # "nist-csf-2.0", "cis-v8", "slsa-v1.2"
    title: str
    source: str


class Control(Struct, frozen=True):
    id: str  # official ID: "ID.RA-09", "CIS-2.6", "SLSA_BUILD_LEVEL_2"
    title: str
    framework: str
    source: str
    implementation_groups: tuple[int, ...] = ()  # CIS only
    level: int | None = None  # SLSA Build level only


class ControlsCatalog(Struct, frozen=True):
    frameworks: tuple[Framework, ...]
    controls: dict[str, Control]
    rules: dict[str, tuple[str, ...]]  # rule id -> control ids it evidences

    def for_rule(self, rule: str, slsa_level: int | None = None) -> tuple[str, ...]:
        """The controls a rule evidences; SLSA levels above ``slsa_level`` are left out."""
        ids = self.rules.get(rule, ())
        if slsa_level is None:
            return ids
        return tuple(i for i in ids if (lvl := self.controls[i].level) is None or lvl <= slsa_level)


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(f"controls catalog: {where} must be a non-empty string")
    return value


def parse_catalog(doc: Any) -> ControlsCatalog:
    """Validate a parsed catalog document; raises PolicyError naming the bad entry."""
    if not isinstance(doc, dict):
        raise PolicyError("controls catalog: not a mapping")
    raw_frameworks = doc.get("frameworks")
    if not isinstance(raw_frameworks, dict) or not raw_frameworks:
        raise PolicyError("controls catalog: frameworks must be a non-empty mapping")
    frameworks = {
        key: Framework(
            key,
            _str(val.get("title") if isinstance(val, dict) else None, f"frameworks.{key}.title"),
            _str(val.get("source") if isinstance(val, dict) else None, f"frameworks.{key}.source"),
        )
        for key, val in raw_frameworks.items()
    }
    controls: dict[str, Control] = {}
    raw_controls = doc.get("controls")
    if not isinstance(raw_controls, list):
        raise PolicyError("controls catalog: controls must be a list")
    for n, item in enumerate(raw_controls):
        where = f"controls[{n}]"
        if not isinstance(item, dict):
            raise PolicyError(f"controls catalog: {where} is not a mapping")
        cid = _str(item.get("id"), f"{where}.id")
        if cid in FORBIDDEN_CONTROLS:
            raise PolicyError(f"controls catalog: {where}: {cid} must not be cited (wrong mapping)")
        if cid in controls:
            raise PolicyError(f"controls catalog: {where}: duplicate id {cid}")
        fw = _str(item.get("framework"), f"{where}.framework")
        if fw not in frameworks:
            raise PolicyError(f"controls catalog: {where}.framework: unknown framework {fw!r}")
        ig = item.get("ig", [])
        level = item.get("level")
        if not isinstance(ig, list) or not all(isinstance(g, int) for g in ig):
            raise PolicyError(f"controls catalog: {where}.ig must be a list of integers")
        if level is not None and not isinstance(level, int):
            raise PolicyError(f"controls catalog: {where}.level must be an integer")
        controls[cid] = Control(
            cid,
            _str(item.get("title"), f"{where}.title"),
            fw,
            frameworks[fw].source,
            tuple(ig),
            level,
        )
    raw_rules = doc.get("rules")
    if not isinstance(raw_rules, dict):
        raise PolicyError("controls catalog: rules must be a mapping")
    rules: dict[str, tuple[str, ...]] = {}
    for rule, ids in raw_rules.items():
        if rule not in RULE_IDS:
            raise PolicyError(f"controls catalog: rules.{rule}: no such policy rule")
        if not isinstance(ids, list) or not ids:
            raise PolicyError(f"controls catalog: rules.{rule} must list control ids")
        for cid in ids:
            if cid not in controls:
                raise PolicyError(f"controls catalog: rules.{rule}: unknown control {cid!r}")
        if len(set(ids)) != len(ids):
            raise PolicyError(f"controls catalog: rules.{rule}: a control is listed twice")
        rules[rule] = tuple(ids)
    missing = [r for r in RULE_IDS if r not in rules]
    if missing:
        raise PolicyError(f"controls catalog: rules without controls: {', '.join(missing)}")
    return ControlsCatalog(tuple(frameworks.values()), controls, rules)


@cache
def default_catalog() -> ControlsCatalog:
    """The catalog shipped with gpuprov (data/controls.yaml)."""
    text = resources.files("scanner.policy").joinpath("data/controls.yaml").read_text("utf-8")
    try:
        return parse_catalog(load_yaml(text))
    except DocumentError as e:
        raise PolicyError(f"controls catalog: {e}") from None
