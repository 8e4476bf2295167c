"""SLSA provenance v1 checks (SLSA "Verifying artifacts"): type, subject, builder, expectations."""

from __future__ import annotations

import json

import pytest

from scanner.verify.errors import Rejected
from scanner.verify.intoto import Statement
from scanner.verify.slsa import SLSA_PROVENANCE_V1, SlsaResult, normalize_repo, verify_provenance
from scanner.verify.trust import (
    BuilderRule,
    IdentityRule,
    Scope,
    Signer,
    SlsaExpectation,
    TrustPolicy,
)
from tests.fixtures.sigstore_private import statement
from tests.scanner.verify.conftest import SHARED_FIXTURES

DIGEST = "ab" * 32
BUILDER = (
    "https://github.com/octo-org/octo-repo/.github/workflows/docker.yaml@refs/heads/development"
)
SIGNER = Signer("gha", Scope((), ("*",)), identity=IdentityRule("https://issuer", subject="s"))


def _predicate() -> dict[str, object]:
    path = SHARED_FIXTURES / "sigstore-real" / "slsa_predicate_v1_0.json"
    if path.exists():  # the upstream example predicate, when the shared data is there
        loaded: dict[str, object] = json.loads(path.read_text())
        return loaded
    return {
        "buildDefinition": {
            "buildType": "https://actions.github.io/buildtypes/workflow/v1",
            "externalParameters": {
                "workflow": {"repository": "https://github.com/octo-org/octo-repo"}
            },
            "resolvedDependencies": [
                {"uri": "git+https://github.com/octo-org/octo-repo@refs/tags/1.21.0"}
            ],
        },
        "runDetails": {"builder": {"id": BUILDER}},
    }


def _stmt(predicate_type: str = SLSA_PROVENANCE_V1, digest: str = DIGEST) -> Statement:
    return Statement.from_bytes(statement([("img", digest)], predicate_type, _predicate()))


def _policy(
    *expect: SlsaExpectation, builders: tuple[BuilderRule, ...] | None = None
) -> TrustPolicy:
    rules = builders if builders is not None else (BuilderRule(2, id=BUILDER, signers=("gha",)),)
    return TrustPolicy((SIGNER,), (), rules, expect)


def _verify(
    policy: TrustPolicy, stmt: Statement | None = None, repo: str = "reg.test/app"
) -> SlsaResult:
    return verify_provenance(
        stmt or _stmt(), subject_sha256=DIGEST, signer=SIGNER, policy=policy, repository=repo
    )


def test_allowed_builder_gives_its_level() -> None:
    result = _verify(_policy())
    assert (result.level, result.builder_id) == (2, BUILDER)
    assert result.source_repo == "https://github.com/octo-org/octo-repo"
    assert result.build_type == "https://actions.github.io/buildtypes/workflow/v1"
    regex = _policy(builders=(BuilderRule(1, id_regex=r"https://github\.com/octo-org/.*"),))
    assert _verify(regex).level == 1


def test_expectations() -> None:
    ok = SlsaExpectation(
        ("reg.test/*",),
        source_repo="https://github.com/Octo-Org/octo-repo.git",
        build_type="https://actions.github.io/buildtypes/workflow/v1",
        min_level=2,
    )
    assert _verify(_policy(ok)).level == 2
    with pytest.raises(Rejected, match="is not the expected https://github.com/evil/repo"):
        _verify(
            _policy(SlsaExpectation(("reg.test/*",), source_repo="https://github.com/evil/repo"))
        )
    with pytest.raises(Rejected, match="build type"):
        _verify(_policy(SlsaExpectation(("reg.test/*",), build_type="https://other/type")))
    with pytest.raises(Rejected, match="policy needs L3"):
        _verify(_policy(SlsaExpectation(("reg.test/*",), min_level=3)))
    # Expectations apply to their images only.
    assert _verify(_policy(SlsaExpectation(("other.test/*",), min_level=3))).level == 2


def test_high_levels_need_named_signers() -> None:
    from scanner.errors import VerifyError

    with pytest.raises(VerifyError, match="name the signers"):
        BuilderRule(2, id=BUILDER)
    assert BuilderRule(1, id=BUILDER).signers == ()


def test_rejections() -> None:
    with pytest.raises(Rejected, match="not an allowed builder"):
        _verify(_policy(builders=(BuilderRule(3, id="https://other/builder", signers=("gha",)),)))
    with pytest.raises(Rejected, match="may not attest"):
        _verify(_policy(builders=(BuilderRule(3, id=BUILDER, signers=("someone-else",)),)))
    with pytest.raises(Rejected, match="is not https://slsa.dev/provenance/v1"):
        _verify(_policy(), _stmt("https://slsa.dev/provenance/v0.2"))
    with pytest.raises(Rejected, match="in-toto subject does not match"):
        _verify(_policy(), _stmt(digest="cd" * 32))
    broken = Statement.from_bytes(statement([("i", DIGEST)], SLSA_PROVENANCE_V1, {"x": 1}))
    with pytest.raises(Rejected, match="not a SLSA provenance v1 predicate"):
        _verify(_policy(), broken)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("git+https://github.com/o/r@refs/tags/v1", "https://github.com/o/r"),
        ("https://GitHub.com/O/R.git", "https://github.com/o/r"),
        ("https://github.com/o/r/", "https://github.com/o/r"),
        ("github.com/o/r", "github.com/o/r"),
    ],
)
def test_normalize_repo(uri: str, expected: str) -> None:
    assert normalize_repo(uri) == expected
