"""Claim ranking of the detect stage: which version and CUDA-major claim wins, and why.

The strongest claim (confidence, then rank: lower is preferred) is the truth; the most precise
claim agreeing with it refines it; a claim contradicting the SONAME's major never wins.
"""

from __future__ import annotations

from scanner.detect.identify import _Claim, _MajorClaim, _resolve_major, _resolve_version
from scanner.model import Confidence

HIGH, MEDIUM, LOW = Confidence.HIGH, Confidence.MEDIUM, Confidence.LOW


def claim(value: str, confidence: Confidence, rank: int) -> _Claim:
    return _Claim(tuple(int(p) for p in value.split(".")), value, confidence, rank)


def resolved(claims: list[_Claim], abi_major: int | None = None) -> str | None:
    found = _resolve_version(claims, abi_major)
    return None if found is None else found.value


def test_no_claims() -> None:
    assert resolved([]) is None
    assert _resolve_major([]) is None


def test_confidence_first_then_rank() -> None:
    assert resolved([claim("8.9.7", LOW, 0), claim("9.1.0", HIGH, 5)]) == "9.1.0"
    assert resolved([claim("8.9.7", MEDIUM, 5), claim("9.1.0", MEDIUM, 1)]) == "9.1.0"
    assert resolved([claim("9.1.0", MEDIUM, 1), claim("8.9.7", MEDIUM, 5)]) == "9.1.0"
    assert resolved([claim("8.9.7", MEDIUM, 2), claim("9.1.0", MEDIUM, 1)]) == "9.1.0"


def test_the_soname_major_excludes_contradicting_claims() -> None:
    claims = [claim("9.1.0", HIGH, 0), claim("8.9.7", LOW, 5)]
    assert resolved(claims, abi_major=8) == "8.9.7"
    assert resolved(claims, abi_major=9) == "9.1.0"
    assert resolved([claim("9.1.0", HIGH, 0)], abi_major=8) is None  # higher major: refused
    assert resolved([claim("7.6.5", HIGH, 0)], abi_major=8) is None  # lower major: refused
    assert resolved(claims, abi_major=None) == "9.1.0"


def test_refined_by_the_most_precise_agreeing_claim() -> None:
    truth = claim("9.1", HIGH, 0)
    assert resolved([truth, claim("9.1.0.70", LOW, 7)]) == "9.1.0.70"
    assert resolved([truth, claim("9.2.0.70", LOW, 7)]) == "9.1"  # disagrees: ignored
    assert resolved([truth, claim("9.0.9.70", LOW, 7)]) == "9.1"  # an older one too
    assert resolved([truth, claim("9.1.0", LOW, 7), claim("9.1.0.70", LOW, 8)]) == "9.1.0.70"
    # Equally precise refinements: confidence, then rank decide.
    assert resolved([truth, claim("9.1.1", LOW, 2), claim("9.1.0", MEDIUM, 7)]) == "9.1.0"
    assert resolved([truth, claim("9.1.1", LOW, 7), claim("9.1.0", LOW, 2)]) == "9.1.0"
    assert resolved([truth, claim("9.1.0", LOW, 2), claim("9.1.1", LOW, 7)]) == "9.1.0"


def major(value: int, confidence: Confidence, rank: int) -> _MajorClaim:
    return _MajorClaim(value, confidence, rank)


def test_cuda_major_from_the_strongest_claim() -> None:
    assert _resolve_major([major(11, LOW, 0), major(12, HIGH, 5)]) == 12
    assert _resolve_major([major(12, HIGH, 5), major(11, LOW, 0)]) == 12
    assert _resolve_major([major(11, MEDIUM, 5), major(12, MEDIUM, 1)]) == 12
    assert _resolve_major([major(12, MEDIUM, 1), major(11, MEDIUM, 5)]) == 12
    assert _resolve_major([major(11, MEDIUM, 2), major(12, MEDIUM, 1)]) == 12
