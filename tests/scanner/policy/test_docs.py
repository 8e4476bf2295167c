"""docs/policy.md and the CI examples stay true: every rule and control documented, every
option the examples pass to `gpuprov gate` / `gpuprov scan` exists."""

from __future__ import annotations

import re
from pathlib import Path

import click
import typer
import yaml

from gpuprov.cli import app
from scanner.policy.controls import default_catalog
from scanner.policy.document import RULE_IDS

DOCS = Path(__file__).resolve().parents[3] / "docs"
EXAMPLES = (
    "gate-github-actions.yml",
    "gate-gitlab-ci.yml",
    "gate-github-actions-keyless.yml",
    "gate-gitlab-ci-keyless.yml",
)


def test_policy_doc_names_every_rule_and_control() -> None:
    text = (DOCS / "policy.md").read_text()
    for rule in RULE_IDS:
        assert f"| `{rule}` |" in text, rule
    catalog = default_catalog()
    for cid in catalog.controls:
        short = cid if not cid.startswith("SLSA_") else "SLSA_BUILD_LEVEL_1"
        assert short in text, cid


#: how the README's one-sentence summary names each rule
README_NAMES = {
    "integrity": "integrity",
    "ownership": "ownership",
    "provenance": "provenance",
    "versions": "versions",
    "cuda_pairing": "CUDA pairing",
    "mixed_cudnn": "mixed cuDNN",
    "duplicates": "duplicates",
    "driver": "driver",
    "loaded": "loaded libraries",
    "image_signature": "image signature",
    "slsa": "SLSA level",
    "scan_age": "scan age",
    "parity": "parity",
    "advisories": "advisories",
}


def test_the_readme_lists_every_rule() -> None:
    """Issue 18 §6's class: a list or count in the docs that the code decides (the README's list
    of rules left out `loaded`)."""
    assert set(README_NAMES) == set(RULE_IDS)
    readme = " ".join((DOCS.parent / "README.md").read_text().split())
    found = re.search(r"A PromotionPolicy \(([^)]*)\)", readme)
    assert found is not None
    assert found.group(1).split(", ") == [README_NAMES[r] for r in RULE_IDS]


def _options(name: str) -> set[str]:
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    command = group.get_command(click.Context(group), name)
    assert command is not None
    return {o for p in command.params for o in getattr(p, "opts", [])}


def test_ci_examples_are_yaml_and_use_real_options() -> None:
    gate = _options("gate")
    scan = _options("scan")
    for name in EXAMPLES:
        text = (DOCS / "examples" / name).read_text()
        assert yaml.safe_load(text)
        assert (DOCS / "policy.md").read_text().count(f"examples/{name}") >= 1
        commands = re.findall(r"gpuprov (gate|scan)((?:[^\n]*\\\n|[^\n]*\n\s+--)*[^\n]*)", text)
        assert commands, name
        for command, rest in commands:
            allowed = gate | scan if command == "gate" else scan
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
                assert option in allowed, (name, command, option)


def test_example_policies_load() -> None:
    from scanner.policy.document import load_policy

    assert load_policy((DOCS / "examples" / "demo-policy.yaml").read_bytes()).policy.name == "demo"
    text = (DOCS / "policy.md").read_text()
    block = text[text.index("```yaml\napiVersion") + len("```yaml\n") :]
    assert load_policy(block[: block.index("```")].encode()).policy.name == "prod"
