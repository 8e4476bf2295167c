"""The controls catalog: loads, every rule's controls exist, wrong mappings are never cited."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest
import yaml

from scanner.policy.controls import FORBIDDEN_CONTROLS, default_catalog, parse_catalog
from scanner.policy.document import RULE_IDS, PolicyError
from scanner.policy.drivers import default_drivers, parse_drivers


def _raw() -> dict[str, object]:
    text = resources.files("scanner.policy").joinpath("data/controls.yaml").read_text()
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def test_catalog_loads_with_three_frameworks_and_sources() -> None:
    catalog = default_catalog()
    assert {f.id for f in catalog.frameworks} == {"slsa-v1.2", "cis-v8", "nist-csf-2.0"}
    assert all(c.title and c.source for c in catalog.controls.values())
    assert catalog.controls["CIS-2.6"].implementation_groups == (2, 3)
    assert catalog.controls["ID.AM-02"].title.startswith("Inventories of software")
    assert catalog.controls["SLSA_BUILD_LEVEL_3"].level == 3


def test_every_rule_cites_existing_controls_and_never_the_wrong_ones() -> None:
    catalog = default_catalog()
    assert set(catalog.rules) == set(RULE_IDS)
    for rule, ids in catalog.rules.items():
        assert ids, rule
        assert all(i in catalog.controls for i in ids), rule
        assert not FORBIDDEN_CONTROLS & set(ids), rule
    assert not FORBIDDEN_CONTROLS & set(catalog.controls)
    # the mappings
    assert {"ID.RA-09", "PR.DS-01", "DE.CM-09", "CIS-2.5", "CIS-2.6"} <= set(
        catalog.rules["integrity"]
    )
    assert {"CIS-2.3", "CIS-2.6", "PR.PS-05"} <= set(catalog.rules["ownership"])
    assert {"CIS-2.2", "CIS-16.5", "PR.PS-02"} <= set(catalog.rules["versions"])
    assert {"ID.AM-02", "CIS-2.1", "CIS-2.4", "CIS-16.4"} <= set(catalog.rules["scan_age"])


def test_the_forbidden_controls_are_the_two_wrong_mappings() -> None:
    # CSF 2.0 PR.DS-10 is data-in-use and PR.PS-03 is hardware maintenance: neither is about
    # software integrity (reference/controls-and-formats.md), so neither may ever be cited
    assert FORBIDDEN_CONTROLS == {"PR.DS-10", "PR.PS-03"}


def test_no_packaged_file_mentions_the_wrong_controls_as_a_citation() -> None:
    doc = _raw()
    cited = {c["id"] for c in doc["controls"]}  # type: ignore[index, union-attr]
    assert not cited & FORBIDDEN_CONTROLS


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["rules"]["integrity"].append("PR.DS-99"), "unknown control 'PR.DS-99'"),
        (
            lambda d: d["controls"].append(
                {"id": "PR.DS-10", "framework": "nist-csf-2.0", "title": "x"}
            ),
            "PR.DS-10 must not be cited",
        ),
        (
            lambda d: d["controls"].append(
                {"id": "PR.PS-03", "framework": "nist-csf-2.0", "title": "x"}
            ),
            "PR.PS-03 must not be cited",
        ),
        (lambda d: d["rules"].pop("parity"), "rules without controls: parity"),
        (lambda d: d["rules"].update(signature=["ID.RA-09"]), "no such policy rule"),
        (lambda d: d["controls"][0].update(framework="iso"), "unknown framework"),
        (lambda d: d["rules"]["integrity"].append("ID.RA-09"), "a control is listed twice"),
        (lambda d: d["rules"].update(integrity=[]), "rules.integrity must list control ids"),
        (lambda d: d["rules"].update(integrity="ID.RA-09"), "rules.integrity must list control"),
        (lambda d: d.update(frameworks={}), "frameworks must be a non-empty mapping"),
        (lambda d: d.update(frameworks=["cis-v8"]), "frameworks must be a non-empty mapping"),
        (lambda d: d["controls"][0].update(title="  "), r"controls\[0\]\.title must be a non"),
        (lambda d: d["controls"][0].update(title=7), r"controls\[0\]\.title must be a non"),
        (lambda d: d["controls"][0].update(ig=[1, "2"]), "ig must be a list of integers"),
        (lambda d: d["controls"][0].update(ig="12"), "ig must be a list of integers"),
        (lambda d: d["controls"][0].update(level="2"), "level must be an integer"),
        (lambda d: d["controls"].append(dict(d["controls"][0])), "duplicate id"),
        (lambda d: d.update(controls={}), "controls must be a list"),
        (lambda d: d["controls"].append("ID.RA-09"), r"controls\[\d+\] is not a mapping"),
        (lambda d: d.update(rules=[]), "rules must be a mapping"),
        (lambda d: d["frameworks"].update(x={"title": "X"}), r"frameworks\.x\.source"),
    ],
)
def test_a_broken_catalog_is_refused(change: object, expected: str) -> None:
    doc = _raw()
    assert callable(change)
    change(doc)
    with pytest.raises(PolicyError, match=expected):
        parse_catalog(doc)


def test_driver_table_is_sourced_data() -> None:
    table = default_drivers()
    assert table.minimum == {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
    assert "docs.nvidia.com" in table.source_url
    assert table.satisfies("535.309.01", 12) is True
    assert table.satisfies("470.256.02", 12) is False
    assert table.satisfies("535.309.01", 13) is False
    assert table.satisfies("535.309.01", 10) is None
    # the minimum itself runs its CUDA major; a driver version that is none cannot be judged
    assert table.satisfies("525.60.13", 12) is True
    assert table.satisfies("525.60.12", 12) is False
    assert table.satisfies("new", 12) is None
    with pytest.raises(AttributeError):
        table.minimum = {}  # type: ignore[misc]


def _drivers() -> dict[str, Any]:
    text = resources.files("scanner.policy").joinpath("data/drivers.yaml").read_text()
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.update(source="nvidia"), "source.name and source.url"),
        (lambda d: d["source"].pop("name"), "source.name and source.url"),
        (lambda d: d["source"].pop("url"), "source.name and source.url"),
        (lambda d: d["source"].update(url=""), "source.name and source.url"),
        (lambda d: d.update(minimum_linux_driver={}), "must be a non-empty mapping"),
        (lambda d: d.update(minimum_linux_driver=["525.60.13"]), "must be a non-empty mapping"),
        (lambda d: d["minimum_linux_driver"].update({"14": "590.1"}), "no CUDA major"),
        (lambda d: d["minimum_linux_driver"].update({14: 590}), "no CUDA major"),
        (lambda d: d["minimum_linux_driver"].update({14: "soon"}), "no CUDA major"),
        (lambda d: d.clear(), "source.name and source.url"),
    ],
)
def test_a_broken_driver_table_is_refused(change: object, expected: str) -> None:
    doc = _drivers()
    assert callable(change)
    change(doc)
    with pytest.raises(PolicyError, match=expected):
        parse_drivers(doc)
    with pytest.raises(PolicyError, match="not a mapping"):
        parse_drivers([doc])


def test_slsa_levels_above_the_required_one_are_not_cited() -> None:
    catalog = default_catalog()
    every = catalog.for_rule("slsa")
    assert {"SLSA_BUILD_LEVEL_1", "SLSA_BUILD_LEVEL_2", "SLSA_BUILD_LEVEL_3"} <= set(every)
    others = tuple(c for c in every if catalog.controls[c].level is None)
    assert others == ("ID.RA-09", "GV.SC-09")
    for level, cited in (
        (3, every),
        (2, (*others, "SLSA_BUILD_LEVEL_1", "SLSA_BUILD_LEVEL_2")),
        (1, (*others, "SLSA_BUILD_LEVEL_1")),
        (0, others),
    ):
        assert catalog.for_rule("slsa", level) == cited, level
    # a rule citing no SLSA level is cited whole whatever the level
    assert catalog.for_rule("integrity", 0) == catalog.for_rule("integrity")
    assert catalog.for_rule("nope") == ()


def test_the_shared_catalog_cannot_be_changed() -> None:
    # default_catalog() is one object shared by every evaluation: frozen all the way down
    catalog = default_catalog()
    for value, attribute in (
        (catalog, "rules"),
        (catalog.controls["CIS-2.6"], "title"),
        (catalog.frameworks[0], "source"),
    ):
        with pytest.raises(AttributeError):
            setattr(value, attribute, "changed")


class _Packaged:
    """`importlib.resources.files()` of a package whose data file holds ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def joinpath(self, _: str) -> _Packaged:
        return self

    def read_text(self, *_: object) -> str:
        return self.text


@pytest.mark.parametrize("text", ["a: [", "{a: 1, a: 2}"])
def test_a_broken_packaged_table_is_a_policy_error(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scanner.policy import controls, drivers

    for module, loader, prefix in (
        (controls, controls.default_catalog, "controls catalog: "),
        (drivers, drivers.default_drivers, "driver table: "),
    ):
        monkeypatch.setattr(module.resources, "files", lambda _: _Packaged(text))
        with pytest.raises(PolicyError, match=f"^{prefix}"):
            loader.__wrapped__()  # type: ignore[attr-defined]
        monkeypatch.undo()
