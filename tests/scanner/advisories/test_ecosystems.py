"""Version orders and ``vers:`` ranges of OSV's ecosystems: Debian against dpkg itself, PEP 440
against ``packaging``, SemVer against the specification's own examples, and the range algorithm
against intervals computed directly."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from scanner.advisories.ecosystems import (
    VersionError,
    compare,
    compare_deb,
    compare_semver,
    contains,
    normalize_name,
    parse_vers,
)

DPKG = shutil.which("dpkg")

# -- Debian -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1.0", "1.0", 0),
        ("1.0", "1.0-0", 0),  # an absent revision is "0"
        ("1.0~rc1", "1.0", -1),  # "~" before the end
        ("1.0~~", "1.0~", -1),
        ("1.0", "1.0+b1", -1),
        ("1.0a", "1.0+", -1),  # letters before non-letters
        ("1:0.1", "2.0", 1),  # the epoch first
        ("535.261.03-1", "535.274.02-1~deb12u1", -1),
        ("535.274.02-1~deb12u1", "535.274.02-1", -1),  # a stable update before unstable's
        ("535.274.02-1+b1", "535.274.02-1", 1),  # a binNMU after its source
        ("11.9.0.86~11.8.0-5~deb12u1", "11.9.0.86~11.8.0-5", -1),
        ("1.001", "1.1", 0),  # leading zeros
        ("2.0-1-2", "2.0-1-10", -1),  # the revision after the last hyphen
    ],
)
def test_debian_order_examples(a: str, b: str, expected: int) -> None:
    assert compare_deb(a, b) == expected
    assert compare_deb(b, a) == -expected


@pytest.mark.parametrize("bad", ["", "abc", "1.0 2", "a:1.0", "1:", "1.0-", "1:2:3.0é"])
def test_not_debian_versions_are_refused(bad: str) -> None:
    with pytest.raises(VersionError):
        compare_deb(bad, "1.0")


_DEB_PART = st.text(alphabet="0123456789.+~abz", min_size=0, max_size=6)
_DEB_VERSION = st.builds(
    lambda epoch, digit, upstream, rev: (
        (f"{epoch}:" if epoch is not None else "") + digit + upstream + (f"-{rev}" if rev else "")
    ),
    st.one_of(st.none(), st.integers(0, 3)),
    st.sampled_from("0123456789"),
    st.text(alphabet="0123456789.+~abz-", max_size=8),
    _DEB_PART,
)


@pytest.mark.skipif(DPKG is None, reason="dpkg is not installed (Debian's own order to compare)")
@settings(max_examples=150, deadline=None)
@given(_DEB_VERSION, _DEB_VERSION)
def test_debian_order_is_dpkgs(a: str, b: str) -> None:
    """Whatever two versions: the same answer as ``dpkg --compare-versions``."""
    assert DPKG is not None
    lt = subprocess.run([DPKG, "--compare-versions", a, "lt", b], capture_output=True)
    eq = subprocess.run([DPKG, "--compare-versions", a, "eq", b], capture_output=True)
    try:
        mine = compare_deb(a, b)
    except VersionError:
        return  # refused here (stricter than dpkg is allowed: the caller reviews it)
    # what dpkg refuses is refused here too: never an answer dpkg would not give
    assert b"error" not in lt.stderr + eq.stderr, (a, b, lt.stderr)
    theirs = -1 if lt.returncode == 0 else 0 if eq.returncode == 0 else 1
    assert mine == theirs, (a, b)


# -- PEP 440 ----------------------------------------------------------------------------------

_PEP440 = st.builds(
    lambda rel, pre, post, dev, local: (
        ".".join(map(str, rel)) + pre + post + dev + (f"+{local}" if local else "")
    ),
    st.lists(st.integers(0, 20), min_size=1, max_size=4),
    st.sampled_from(["", "a1", "b2", "rc1", "rc10"]),
    st.sampled_from(["", ".post1", ".post2"]),
    st.sampled_from(["", ".dev0", ".dev3"]),
    st.sampled_from(["", "cu121", "cu118"]),
)


@settings(max_examples=300)
@given(_PEP440, _PEP440)
def test_pypi_order_is_pep_440(a: str, b: str) -> None:
    va, vb = Version(a), Version(b)
    assert compare("pypi", a, b) == (va > vb) - (va < vb)


def test_pypi_refuses_what_pep_440_does_not_read() -> None:
    with pytest.raises(VersionError, match="not a PEP 440 version"):
        compare("pypi", "1.0-foo-bar baz", "1.0")


# -- SemVer 2.0.0 -----------------------------------------------------------------------------

#: §11's own example of precedence, in order
_SEMVER_SPEC = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "2.0.0",
    "2.1.0",
    "2.1.1",
]


def test_semver_precedence_of_the_specification() -> None:
    for i, a in enumerate(_SEMVER_SPEC):
        for j, b in enumerate(_SEMVER_SPEC):
            assert compare_semver(a, b) == (i > j) - (i < j), (a, b)


def test_semver_ignores_build_metadata_and_takes_gos_v() -> None:
    assert compare_semver("v1.17.8", "1.17.8+incompatible") == 0
    # a Go pseudo-version is a pre-release of its base
    assert compare_semver("0.0.0-20240101000000-abcdefabcdef", "0.0.0") == -1
    for bad in ("1.17", "01.2.3", "1.2.3-", "1.2.3-01"):
        with pytest.raises(VersionError):
            compare_semver(bad, "1.0.0")


# -- names ------------------------------------------------------------------------------------


def test_names_are_normalized_per_ecosystem() -> None:
    assert normalize_name("pypi", "Nvidia_CUDNN.cu12") == "nvidia-cudnn-cu12"
    assert normalize_name("pypi", "torch") == "torch"
    assert normalize_name("golang", "github.com/NVIDIA/x") == "github.com/nvidia/x"
    assert normalize_name("deb", "Nvidia-Graphics-Drivers") == "nvidia-graphics-drivers"


# -- vers: ranges -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vers", "inside", "outside"),
    [
        ("vers:pypi/*", ["0", "9.1.0", "99"], []),
        ("vers:pypi/<9.1.0", ["8.9", "9.0.0.312", "9.1.0rc1"], ["9.1.0", "9.1.0.70", "10"]),
        ("vers:pypi/>=9.0|<9.1.0.70", ["9.0", "9.1.0.69"], ["8.9.7.29", "9.1.0.70"]),
        # two ranges in one (OSV's introduced/fixed pairs)
        ("vers:pypi/<1.5|>=2.0|<2.3", ["1.4", "2.0", "2.2"], ["1.5", "1.9", "2.3"]),
        ("vers:pypi/>=1.0|<=1.2", ["1.0", "1.2"], ["0.9", "1.2.1"]),
        ("vers:pypi/9.0.0|9.0.1", ["9.0.0", "9.0.1", "9.0"], ["9.0.2"]),
        ("vers:pypi/!=1.1|>=1.0", ["1.0", "1.2"], ["1.1", "0.5"]),
        ("vers:deb/<535.274.02-1~deb12u1", ["535.261.03-1"], ["535.274.02-1~deb12u1"]),
        ("vers:golang/>=1.17.0|<1.17.8", ["1.17.3", "v1.17.7"], ["1.16.9", "1.17.8"]),
    ],
)
def test_vers_containment(vers: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_vers(vers)
    for v in inside:
        assert contains(parsed, v), (vers, v)
    for v in outside:
        assert not contains(parsed, v), (vers, v)


@pytest.mark.parametrize(
    ("vers", "why"),
    [
        ("pypi/<1.0", "not a vers: range"),
        ("vers:npm/<1.0", "no version order"),
        ("vers:pypi/<not a version", "not a PEP 440 version"),
        ("vers:pypi/<1.0||>2.0", "an empty constraint"),
        ("vers:pypi/>=", "has no version"),
    ],
)
def test_unreadable_vers_is_refused(vers: str, why: str) -> None:
    with pytest.raises(VersionError, match=why):
        parse_vers(vers)


def test_constraints_forming_no_range_are_refused_not_guessed() -> None:
    with pytest.raises(VersionError, match="form no range"):
        contains(parse_vers("vers:pypi/>=1.0|>=2.0"), "3.0")
    with pytest.raises(VersionError, match="bounded twice"):
        contains(parse_vers("vers:pypi/>=1.0|<1.0"), "3.0")
    with pytest.raises(VersionError, match="not a PEP 440"):
        contains(parse_vers("vers:pypi/<1.0"), "what")
    # a listed release PEP 440 does not read names only itself (and never fails the list)
    listed = parse_vers("vers:pypi/1.0-foo-bar|2.0")
    assert contains(listed, "2.0") and not contains(listed, "1.0")


_BOUNDS = st.lists(st.integers(0, 30), min_size=2, max_size=6, unique=True).map(sorted)


@settings(max_examples=300)
@given(_BOUNDS, st.integers(0, 31), st.booleans())
def test_vers_of_intervals_agrees_with_the_intervals(
    bounds: list[int], probe: int, open_start: bool
) -> None:
    """OSV's introduced/fixed pairs as a vers range contain exactly the versions of the
    half-open intervals [introduced, fixed)."""
    pairs = list(zip(bounds[::2], bounds[1::2], strict=False))
    parts = []
    for i, (lo, hi) in enumerate(pairs):
        if not (open_start and i == 0):
            parts.append(f">={lo}.0")
        parts.append(f"<{hi}.0")
    if len(bounds) % 2:  # an introduced with no fix: every later version
        parts.append(f">={bounds[-1]}.0")
    vers = parse_vers("vers:pypi/" + "|".join(parts))
    expected = any(
        (open_start and i == 0 or lo <= probe) and probe < hi for i, (lo, hi) in enumerate(pairs)
    ) or (len(bounds) % 2 == 1 and probe >= bounds[-1])
    assert contains(vers, f"{probe}.0") == expected
