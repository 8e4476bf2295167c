"""Package ecosystems of OSV advisories: each one's name rule and version order, and purl-spec
``vers:`` ranges evaluated with them.

The matcher (``scanner.advisories.match``) compares an installed package with an OSV document's
ranges here: PyPI by PEP 440 (``packaging``, the reference implementation) and PEP 503 names,
Debian by dpkg's own order (deb-version(7); the source package's name and version, which OSV's
Debian entries name), Go by Semantic Versioning 2.0.0 with Go's leading ``v``. Pure: no files.
A version or range that cannot be read raises ``VersionError``; the caller makes that a finding
for review, never a pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cmp_to_key
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote

if TYPE_CHECKING:
    from packaging.version import Version

#: the purl type (and ``vers:`` scheme) of each OSV ecosystem, by its name before any
#: ":release" suffix (``Debian:12``); the reader (scanner/advisories/osv.py) takes these only
SCHEMES: Final = {"PyPI": "pypi", "Go": "golang", "Debian": "deb"}
#: the ecosystem name of each scheme (the finding's product: ``PyPI/nvidia-cudnn-cu12``)
ECOSYSTEM_OF: Final = {v: k for k, v in SCHEMES.items()}


class VersionError(ValueError):
    """A version or a ``vers:`` range that its scheme cannot compare (message: why)."""


# -- names ------------------------------------------------------------------------------------

_PEP503: Final = re.compile(r"[-_.]+")


def normalize_name(scheme: str, name: str) -> str:
    """A package name as its ecosystem compares it: PEP 503 for PyPI (``Nvidia_CUDNN.cu12`` ->
    ``nvidia-cudnn-cu12``), lowercase for Debian (deb names are lowercase by policy) and Go
    (module paths on GitHub are case-insensitive: a false match goes to a person, a miss to no
    one)."""
    if scheme == "pypi":
        return _PEP503.sub("-", name).lower()
    return name.strip().lower()


# -- versions ---------------------------------------------------------------------------------


def _pep440(a: str, b: str) -> int:
    va, vb = _pypi_version(a), _pypi_version(b)
    return (va > vb) - (va < vb)


def _pypi_version(text: str) -> Version:
    # imported here: reading an OSV document (osv.py takes SCHEMES) compares no version
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        raise VersionError(f"{text!r} is not a PEP 440 version") from None


#: deb-version(7): [epoch:]upstream[-revision]; upstream starts with a digit
_DEB: Final = re.compile(
    r"^(?:(?P<epoch>\d{1,9}):)?(?P<upstream>[0-9][A-Za-z0-9.+~:-]*?)(?:-(?P<rev>[A-Za-z0-9.+~]+))?$"
)


def deb_parts(text: str) -> tuple[int, str, str]:
    """(epoch, upstream, revision) of a Debian version; ``VersionError`` when it is not one."""
    m = _DEB.fullmatch(text.strip())
    if m is None or text.strip().endswith("-"):  # dpkg: "revision number is empty"
        raise VersionError(f"{text!r} is not a Debian version")
    upstream = m.group("upstream")
    if ":" in upstream and m.group("epoch") is None:
        raise VersionError(f"{text!r} is not a Debian version (a colon without an epoch)")
    return int(m.group("epoch") or 0), upstream, m.group("rev") or ""


def _deb_order(c: str) -> int:
    # dpkg lib/dpkg/version.c order(): "~" sorts before everything, even the end of the part;
    # letters before non-letters
    if c == "~":
        return -1
    if c.isascii() and c.isalpha():
        return ord(c)
    return ord(c) + 256


def _verrevcmp(a: str, b: str) -> int:
    """dpkg's verrevcmp: alternating non-digit and digit runs, compared in turn."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not _digit(a[i])) or (j < len(b) and not _digit(b[j])):
            ac = _deb_order(a[i]) if i < len(a) and not _digit(a[i]) else 0
            bc = _deb_order(b[j]) if j < len(b) and not _digit(b[j]) else 0
            if ac != bc:
                return -1 if ac < bc else 1
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        first_diff = 0
        while i < len(a) and _digit(a[i]) and j < len(b) and _digit(b[j]):
            if not first_diff:
                first_diff = (a[i] > b[j]) - (a[i] < b[j])
            i += 1
            j += 1
        if i < len(a) and _digit(a[i]):
            return 1
        if j < len(b) and _digit(b[j]):
            return -1
        if first_diff:
            return first_diff
    return 0


def _digit(c: str) -> bool:
    return "0" <= c <= "9"


def compare_deb(a: str, b: str) -> int:
    """dpkg --compare-versions: epoch, then upstream, then revision (an absent revision is
    "0", which compares as the empty one)."""
    ea, ua, ra = deb_parts(a)
    eb, ub, rb = deb_parts(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _verrevcmp(ua, ub) or _verrevcmp(ra, rb)


#: Semantic Versioning 2.0.0 §2, §9, §10 (the official regular expression's shape), with Go's
#: leading "v" (OSV's Go ranges drop it, module versions and purls keep it)
_SEMVER: Final = re.compile(
    r"^v?(?P<major>0|[1-9]\d{0,17})\.(?P<minor>0|[1-9]\d{0,17})\.(?P<patch>0|[1-9]\d{0,17})"
    r"(?:-(?P<pre>(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


def _semver_key(text: str) -> tuple[tuple[int, int, int], tuple[str, ...] | None]:
    m = _SEMVER.fullmatch(text.strip())
    if m is None:
        raise VersionError(f"{text!r} is not a semantic version")
    core = (int(m.group("major")), int(m.group("minor")), int(m.group("patch")))
    pre = tuple(m.group("pre").split(".")) if m.group("pre") else None
    return core, pre


def compare_semver(a: str, b: str) -> int:
    """SemVer 2.0.0 §11 precedence: build metadata ignored, a pre-release before its release,
    pre-release identifiers numeric (numerically) before alphanumeric (in ASCII order)."""
    (ca, pa), (cb, pb) = _semver_key(a), _semver_key(b)
    if ca != cb:
        return -1 if ca < cb else 1
    if pa is None or pb is None:
        return (pa is None) - (pb is None)
    for x, y in zip(pa, pb, strict=False):
        if x == y:
            continue
        xn, yn = x.isdigit(), y.isdigit()
        if xn and yn:
            return -1 if int(x) < int(y) else 1
        if xn != yn:
            return -1 if xn else 1
        return -1 if x < y else 1
    return (len(pa) > len(pb)) - (len(pa) < len(pb))


_COMPARE: Final[dict[str, Callable[[str, str], int]]] = {
    "pypi": _pep440,
    "deb": compare_deb,
    "golang": compare_semver,
}


def compare(scheme: str, a: str, b: str) -> int:
    """-1, 0 or 1 as version ``a`` sorts before, with or after ``b`` in the scheme's order;
    ``VersionError`` for a version the scheme does not read (or a scheme this module lacks)."""
    cmp = _COMPARE.get(scheme)
    if cmp is None:
        raise VersionError(f"no version order for the {scheme!r} scheme")
    return cmp(a, b)


def check_version(scheme: str, version: str) -> None:
    """``VersionError`` unless ``version`` is one the scheme compares."""
    compare(scheme, version, version)


# -- vers: ranges (purl-spec VERSION-RANGE-SPEC) ----------------------------------------------

_COMPARATORS: Final = (">=", "<=", "!=", "<", ">", "=")


@dataclass(frozen=True)
class Constraint:
    comparator: str
    version: str


@dataclass(frozen=True)
class Vers:
    """A parsed ``vers:<scheme>/<constraints>`` range."""

    scheme: str
    #: empty: "*" (every version)
    constraints: tuple[Constraint, ...]
    text: str

    @property
    def fixes(self) -> tuple[str, ...]:
        """The exclusive upper bounds (OSV's ``fixed`` events), in the range's order."""
        return tuple(c.version for c in self.constraints if c.comparator == "<")


def parse_vers(text: str) -> Vers:
    """A ``vers:`` string as its parts; ``VersionError`` when it is not one (a bound the scheme
    cannot compare included; an unreadable version of a ``=`` list is kept, compared as text)."""
    if not text.startswith("vers:") or "/" not in text:
        raise VersionError(f"{text[:200]!r} is not a vers: range")
    scheme, _, body = text[len("vers:") :].partition("/")
    scheme = scheme.lower()
    if scheme not in _COMPARE:
        raise VersionError(f"{text[:200]!r}: no version order for the {scheme!r} scheme")
    body = "".join(body.split())
    if body == "*":
        return Vers(scheme, (), text)
    out: list[Constraint] = []
    for raw in body.split("|"):
        if not raw:
            raise VersionError(f"{text[:200]!r}: an empty constraint")
        op = next((c for c in _COMPARATORS if raw.startswith(c)), "=")
        version = unquote(raw[len(op) :] if raw.startswith(op) else raw)
        if not version or version == "*":
            raise VersionError(f"{text[:200]!r}: constraint {raw[:100]!r} has no version")
        if op not in ("=", "!="):
            try:
                check_version(scheme, version)
            except VersionError as e:
                raise VersionError(f"{text[:200]!r}: {e}") from None
        out.append(Constraint(op, version))
    return Vers(scheme, tuple(out), text)


def contains(vers: Vers, version: str) -> bool:
    """Whether ``version`` lies in the range, by the spec's algorithm ("How to check if a
    version is contained within a range"). ``VersionError`` for an installed version the scheme
    cannot compare or constraints that form no range (two lower bounds in a row)."""
    check_version(vers.scheme, version)
    if not vers.constraints:
        return True

    def cmp(a: str, b: str) -> int:
        return compare(vers.scheme, a, b)

    for c in vers.constraints:
        equal = _equal(vers.scheme, c.version, version)
        if equal and c.comparator in ("=", "<=", ">="):
            return True
        if equal and c.comparator == "!=":
            return False
    ranges = [c for c in vers.constraints if c.comparator not in ("=", "!=")]
    if not ranges:
        return False
    ranges.sort(key=cmp_to_key(lambda x, y: cmp(x.version, y.version)))
    below = ("<", "<=")
    for x, y in zip(ranges, ranges[1:], strict=False):
        # the spec's constraints alternate: a lower bound, its upper bound, the next lower ...
        if cmp(x.version, y.version) == 0:
            raise VersionError(f"{vers.text[:200]!r}: version {x.version!r} is bounded twice")
        if (x.comparator in below) == (y.comparator in below):
            raise VersionError(
                f"{vers.text[:200]!r}: {x.comparator}{x.version} and "
                f"{y.comparator}{y.version} form no range"
            )
    if ranges[0].comparator in below and cmp(version, ranges[0].version) < 0:
        return True
    if ranges[-1].comparator not in below and cmp(version, ranges[-1].version) > 0:
        return True
    for cur, nxt in zip(ranges, ranges[1:], strict=False):
        if cur.comparator in below:
            continue  # the gap between two ranges
        if cmp(cur.version, version) < 0 < cmp(nxt.version, version):
            return True
    return False


def _equal(scheme: str, listed: str, version: str) -> bool:
    try:
        return compare(scheme, listed, version) == 0
    except VersionError:
        # a version list may hold a release the scheme does not read (PyPI's legacy ones):
        # it names only itself
        return listed == version
