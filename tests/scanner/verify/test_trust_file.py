"""Trust policy loading: a field of the wrong type or out of range is refused with its path,
and whatever the document holds the loader raises VerifyError, nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scanner.errors import VerifyError
from scanner.verify.trust_file import (
    load_trust_policy,
    parse_trust_policy,
    trust_policy_from_document,
)
from tests.fixtures import keys
from tests.scanner.test_loaders import laughs

PEM = keys.public_pem(keys.shared("ecdsa")).decode()


def _key_signer(**extra: object) -> dict[str, object]:
    return {"name": "a", "key_pem": PEM, "families": ["*"], **extra}


def _inline(doc: object) -> None:
    trust_policy_from_document(doc, base_dir=None, source="p.yaml")


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"signers": [{"name": "a", "key_pem": 5, "families": ["*"]}]}, "signers[0].key_pem"),
        ({"signers": [{"name": "a", "key_pem": None, "key": 5}]}, "signers[0].key"),
        (
            {"signers": [{"name": "a", "issuer": 5, "subject": "s", "families": ["*"]}]},
            "signers[0].issuer",
        ),
        (
            {"signers": [{"name": "a", "issuer": "i", "subject": ["s"], "images": ["*"]}]},
            "signers[0].subject",
        ),
        ({"signers": [_key_signer(families=[3])]}, "signers[0].families[0]"),
        ({"signers": [_key_signer(families=[""])]}, "signers[0].families[0]"),
        ({"signers": [_key_signer(name=7)]}, "signers[0].name"),
        (
            {"signers": [_key_signer()], "slsa": {"expect": [{"images": ["x"], "min_level": -3}]}},
            "slsa.expect[0].min_level",
        ),
        (
            {"signers": [_key_signer()], "slsa": {"expect": [{"images": ["x"], "min_level": "3"}]}},
            "slsa.expect[0].min_level",
        ),
        (
            {"signers": [_key_signer()], "slsa": {"expect": [{"images": ["x"], "source_repo": 1}]}},
            "slsa.expect[0].source_repo",
        ),
        (
            {"signers": [_key_signer()], "slsa": {"builders": [{"id": 5, "level": 1}]}},
            "slsa.builders[0].id",
        ),
        (
            {"signers": [_key_signer()], "slsa": {"builders": [{"id": "b", "level": True}]}},
            "slsa.builders[0].level",
        ),
        ({"signers": [_key_signer()], "roots": [{"trusted_root": 5}]}, "roots[0].trusted_root"),
        ({"signers": [_key_signer()], "roots": ["private"]}, "roots[0]"),
        ({"signers": [_key_signer()], "roots": [{"name": "x"}]}, "roots[0]"),
        ({"signers": [_key_signer(extra=1)]}, "signers[0].extra"),
        ({"signers": {"name": "a"}}, "signers"),
        ({"signers": [_key_signer()], "slsa": []}, "slsa"),
        ({"version": "1", "signers": [_key_signer()]}, "version"),
        ({"signers": [_key_signer(key_pem="\ud800")]}, "signers[0].key_pem"),
    ],
)
def test_wrong_types_are_refused_with_their_path(doc: object, path: str) -> None:
    with pytest.raises(VerifyError) as caught:
        _inline(doc)
    assert str(caught.value).startswith("p.yaml: ")
    assert f" {path}: " in str(caught.value)


def test_a_well_formed_document_still_loads() -> None:
    policy = parse_trust_policy(
        yaml.safe_dump(
            {
                "signers": [_key_signer(families="cudnn"), {**_key_signer(), "name": "b"}],
                "slsa": {
                    "builders": [{"id": "https://b", "level": 1, "signers": "a"}],
                    "expect": [{"images": "reg/*", "min_level": 3, "source_repo": "https://r"}],
                },
            }
        ).encode()
    )
    assert policy.signers[0].scope.families == ("cudnn",)
    assert policy.builders[0].signers == ("a",)
    assert policy.expectations[0].min_level == 3 and policy.expectations[0].images == ("reg/*",)


@pytest.mark.parametrize(
    "raw",
    [
        b"signers: [{name: a, created: 2001-02-30}]",  # a YAML timestamp that is no date
        b"a: &x [*x]",  # a self-referencing alias
        b"[" * 5000,
    ],
)
def test_yaml_that_python_cannot_build_is_a_verify_error(raw: bytes) -> None:
    with pytest.raises(VerifyError):
        parse_trust_policy(raw)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"version: " + b"9" * 5000, "an integer of 5000 digits"),
        (b"[" * 50_000 + b"]" * 50_000, "nesting"),
        (b"version: 1\nsigners: []\nversion: 1\n", "duplicate key 'version'"),
        (laughs(9).encode(), "nodes once its aliases are expanded"),
    ],
)
def test_hostile_yaml_is_refused_by_the_one_loader(raw: bytes, reason: str) -> None:
    """The promotion policy, the CDI specs and this loader read YAML with one set of limits."""
    with pytest.raises(VerifyError, match="is not valid YAML") as raised:
        parse_trust_policy(raw)
    assert reason in str(raised.value)


def test_inline_root_with_a_timestamp_is_refused_with_its_path() -> None:
    doc = {"signers": [_key_signer()], "roots": [{"trusted_root": {"when": _Date()}}]}
    with pytest.raises(VerifyError, match=r"roots\[0\]\.trusted_root: not a JSON document"):
        _inline(doc)


class _Date:
    """What yaml.safe_load makes of an unquoted date: an object JSON cannot encode."""


_KEYS = [
    "version", "roots", "signers", "slsa", "name", "key", "key_pem", "issuer", "subject",
    "subject_regex", "families", "images", "unsafe", "path", "trusted_root", "builders",
    "expect", "id", "id_regex", "level", "signers", "min_level", "source_repo", "build_type",
]  # fmt: skip
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.sampled_from(["", "*", "public-good", "ignore-tlog", "a", "(", PEM, "2001-01-01"]),
)
_DOCUMENTS = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOCUMENTS)
def test_any_document_loads_or_raises_verify_error(doc: Any) -> None:
    """The service used to catch five exception types around this call; one is enough."""
    try:
        _inline(doc)
    except VerifyError:
        pass


def test_file_references_are_relative_to_the_policy(tmp_path: Path) -> None:
    keys.write_keypair(tmp_path / "keys", "k", keys.shared("ed25519"))
    doc = {"signers": [{"name": "k", "key": "keys/k.pub", "images": "*"}]}
    path = tmp_path / "trust.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert load_trust_policy(path).signers[0].key is not None
    with pytest.raises(VerifyError, match="signer 'k': cannot read"):
        trust_policy_from_document(doc, base_dir=tmp_path / "elsewhere")
    with pytest.raises(VerifyError, match="signer 'k': key 'keys/k.pub' is a file"):
        _inline(doc)
