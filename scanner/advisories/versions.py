"""NVIDIA's advisory version texts parsed into version ranges with their scope.

NVIDIA writes affected and fixed versions as free text ("All driver versions prior to
535.274.02", "450.203(All versions prior to and including vGPU 11.10)") and its CSAF documents
carry that text slugified into the CPE version field
("all_versions_prior_to_cuda_toolkit_12_9_update_1"). Both forms parse here into the same
``ParsedVersion``; the driver branch comes from the text (a ``linuxr535_`` / ``r535_`` prefix)
or from the platform ("Linux(R535 vGPU 16)"), never from a version's leading number.

A text either parses or comes back with ``parsed=False`` and a ``reason`` (this module never
raises on a str). A slug is lossier than the text it was made from (a dropped hyphen turns
"6.15.6-4" into "6_15_64"): where a CVE Record text slugifies (``nvidia_slug``) to the CSAF
slug, parse the text. Readings that would need a guess (the vendor's own inconsistencies, a fix on
another branch, two bounds that disagree) parse with a ``review`` reason: the matcher sends
those to review instead of deciding.

``ParsedVersion.as_dict()`` keys (all always present, JSON types):
  text, parsed, form ("text"|"slug"), reason (why unparsed), review (why a person must look),
  ranges (list of {lower, upper, vers}; a bound is {version, key, inclusive} or null; key is
  the numeric comparison key as a list, null when the version is not comparable; vers is the
  purl-spec rendering or null), scheme ("driver"|"cuda_toolkit"|"generic"), product_line,
  os, branch ("R535"), branch_line ("vgpu"|"gaming"|null), vgpu_release ("16.11"),
  release ("November 2021 Cloud Gaming"), conditions (list of {name, value, applies_below}),
  commit ({"commit", "fixed": bool} or null), notes (list of str).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Form = Literal["text", "slug"]
Scheme = Literal["driver", "cuda_toolkit", "generic"]
Verdict = Literal["in_range", "out_of_range", "other_branch", "review", "unknown"]

#: a text longer than any real one is refused before any regex sees it
_MAX_TEXT = 400
#: no real NVIDIA version has more parts; a longer one in a slug is several run together
_MAX_SLUG_PARTS = 5
#: Windows drivers of branch R ship majors R..R+9 (R470 ships 472.98, R418 vGPU 8 ships 427.60)
_BRANCH_SPAN = 10
#: at most 18 digits a part: int() refuses 4300+ digits and no real version has more
_PART = re.compile(r"\d{1,18}")

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_MONTH_NAMES = {m[:3]: m.capitalize() for m in _MONTHS.split("|")[:12]}
#: slug tokens where NVIDIA's slugify glued a number to the next word ("450_156_00all_...")
_GLUED = re.compile(rf"^(\d+)(all|vgpu|{_MONTHS}|bfb)(.*)$")
_GLUED_UPDATE = re.compile(r"^(\d+)u(\d+)$")
#: a version inside the normalised text
_VER = (
    r"(?:v|r)?(?:\d+|xx(?=\.\d))(?:\.(?:\d+x*|xx?))*(?:[-_]\d+(?:\.\d+)*)*(?:rc\d+)?"
    r"(?: update \d+)?"
)
_VER_RE = re.compile(_VER)
#: product words before a version, shortest first; "v12.4" and "r25.10" are not words
_WORD = r"(?![vr]\d)[a-z][a-z0-9.]*"
_WORDS = rf"(?:{_WORD}(?: {_WORD})*?)"
_INCL = {
    "prior to and including": True,
    "up to and including": True,
    "prior to": False,
    "prior": False,
    "before release": False,
    "before": False,
    "up to": False,
}
_REL = "|".join(sorted(_INCL, key=len, reverse=True))
_SECONDARY = re.compile(
    rf"(?:all versions (?P<rel>{_REL}) )?(?:the )?"
    rf"(?:vgpu ?(?P<vgpu>\d+\.\d+)|(?P<month>{_MONTHS}) (?P<year>\d{{4}})"
    r"(?P<cg> cloud gaming)? release)"
)
#: the driver products of NVIDIA's product ids, with their qualifiers ("vgpu_software_...")
_PRODUCTS = r"(?:[a-z]+_)*?(?:geforce|nvidia_rtx_quadro_nvs|tesla|guest_driver|virtual_gpu_manager)"
_BRANCH_SLUG = r"r(?P<branch>\d{3})(?:_(?P<line>vgpu)(?:_(?P<vgpu>\d+))?|_(?P<gaming>gaming))?"
#: a CSAF product id's platform part: "linuxr535_geforce_", "r535_", "windowsr580_vgpu_19_"
_DRIVER_PREFIX = re.compile(
    rf"^(?P<os>linux|windows)?{_BRANCH_SLUG}_(?:(?P<product>{_PRODUCTS})_)?(?=[a-z0-9])"
)
#: a hypervisor list before the branch ("xenserver_vmware_vsphere_..._ubuntur535_vgpu_16_"),
#: read only when a driver product follows, so no other slug is cut
_HOST_PREFIX = re.compile(rf"^[a-z0-9_]+?{_BRANCH_SLUG}_(?P<product>{_PRODUCTS})_(?=[a-z0-9])")
_PLATFORM = re.compile(r"^(?P<os>[^()]*?)\s*(?:\((?P<inner>[^()]*)\))?\s*$")
_PLATFORM_INNER = re.compile(
    r"^R(?P<branch>\d{3})(?: (?:(?P<vgpu>vGPU)(?: ?(?P<major>\d+))?|(?P<gaming>Gaming)))?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Version:
    """One version as written, with its numeric comparison key (None: not comparable)."""

    text: str
    key: tuple[int, ...] | None
    #: "1.6.x": every version starting with ``key``
    wildcard: bool = False

    @property
    def normal(self) -> str:
        """The text when it is dotted numbers ("535.274.02"), else the key's dotted form
        ("12.9 Update 1" -> "12.9.1"), else the text."""
        if self.key is None or re.fullmatch(r"\d+(?:\.\d+)*", self.text):
            return self.text
        return ".".join(str(p) for p in self.key)


@dataclass(frozen=True)
class Bound:
    version: Version
    inclusive: bool

    def as_dict(self) -> dict[str, Any]:
        key = list(self.version.key) if self.version.key is not None else None
        return {"version": self.version.text, "key": key, "inclusive": self.inclusive}


@dataclass(frozen=True)
class VersionRange:
    """Versions between two bounds; a missing bound is open (both missing: every version)."""

    lower: Bound | None = None
    upper: Bound | None = None

    @property
    def comparable(self) -> bool:
        return all(b is None or b.version.key is not None for b in (self.lower, self.upper))

    def contains(self, version: str) -> bool | None:
        """Whether ``version`` lies in the range; None when either side is not comparable."""
        key = version_key(version)
        if key is None or not self.comparable:
            return None
        if self.lower is not None:
            c = _cmp(key, self.lower.version.key or ())
            if c < 0 or (c == 0 and not self.lower.inclusive):
                return False
        if self.upper is not None:
            c = _cmp(key, self.upper.version.key or ())
            if c > 0 or (c == 0 and not self.upper.inclusive):
                return False
        return True

    def vers(self, scheme: str = "generic") -> str | None:
        """The purl-spec ``vers:`` rendering ("vers:generic/>=1.0|<1.17.5"), None if opaque."""
        if not self.comparable:
            return None
        lo, up = self.lower, self.upper
        if lo is None and up is None:
            return f"vers:{scheme}/*"
        if lo is not None and up is not None and lo.inclusive and up.inclusive:
            if lo.version.key == up.version.key:
                return f"vers:{scheme}/{lo.version.normal}"
        parts = []
        if lo is not None:
            parts.append((">=" if lo.inclusive else ">") + lo.version.normal)
        if up is not None:
            parts.append(("<=" if up.inclusive else "<") + up.version.normal)
        return f"vers:{scheme}/" + "|".join(parts)

    def as_dict(self, scheme: str = "generic") -> dict[str, Any]:
        return {
            "lower": self.lower.as_dict() if self.lower else None,
            "upper": self.upper.as_dict() if self.upper else None,
            "vers": self.vers(scheme),
        }


@dataclass(frozen=True)
class Condition:
    """A condition the text puts on being affected ("cdi_mode", "gpu_architecture")."""

    name: str
    value: str | None = None
    #: the condition holds only for versions below this one ("CDI mode only for < 1.17.5")
    applies_below: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "applies_below": self.applies_below}


@dataclass(frozen=True)
class Platform:
    """A CVE Record platform or CSAF architecture ("Linux(R535 vGPU 16)") read as scope."""

    text: str
    os: str | None
    branch: str | None
    branch_line: str | None
    vgpu_major: str | None
    extra: str | None


@dataclass(frozen=True)
class ParsedVersion:
    """One version text, parsed (``ranges`` and scope) or not (``reason``)."""

    text: str
    parsed: bool
    form: Form = "text"
    reason: str | None = None
    review: str | None = None
    ranges: tuple[VersionRange, ...] = ()
    scheme: Scheme = "generic"
    product_line: str | None = None
    os: str | None = None
    branch: str | None = None
    branch_line: str | None = None
    vgpu_release: str | None = None
    release: str | None = None
    conditions: tuple[Condition, ...] = ()
    commit: str | None = None
    commit_fixed: bool = False
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "parsed": self.parsed,
            "form": self.form,
            "reason": self.reason,
            "review": self.review,
            "ranges": [r.as_dict() for r in self.ranges],
            "scheme": self.scheme,
            "product_line": self.product_line,
            "os": self.os,
            "branch": self.branch,
            "branch_line": self.branch_line,
            "vgpu_release": self.vgpu_release,
            "release": self.release,
            "conditions": [c.as_dict() for c in self.conditions],
            "commit": (
                {"commit": self.commit, "fixed": self.commit_fixed} if self.commit else None
            ),
            "notes": list(self.notes),
        }


# -- versions ---------------------------------------------------------------------------------


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    pa, pb = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (pa > pb) - (pa < pb)


def version_key(text: str) -> tuple[int, ...] | None:
    """The numeric key of an NVIDIA version form, None when it has none.

    "535.274.02" -> (535, 274, 2); "12.9 Update 1" = "12.9U1" = "12.9.1" -> (12, 9, 1);
    "v1.16.2" -> (1, 16, 2); "1.6.6-1" -> (1, 6, 6, 1). Wildcards, rc tags and labels: None.
    """
    if not isinstance(text, str) or len(text) > 100:
        return None
    s = text.strip().lower()
    s = re.sub(r"^(?:cuda toolkit |cuda )", "", s)
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)(?:\s*(?:update|u)\s*(\d+))?((?:[-_]\d+(?:\.\d+)*)*)", s)
    if m is None:
        return None
    parts = m.group(1).split(".")
    if m.group(2) is not None:
        # Update N of a toolkit release is its third component: 12.4 Update 1 is 12.4.1
        if len(parts) > 2:
            return None
        parts = (parts + ["0"])[:2] + [m.group(2)]
    if m.group(3):
        parts += re.split(r"[-_.]", m.group(3).lstrip("-_"))
    if not all(_PART.fullmatch(p) for p in parts):
        return None
    return tuple(int(p) for p in parts)


def compare_versions(a: str, b: str) -> int | None:
    """-1, 0 or 1 as ``a`` sorts before, with or after ``b``; None when either is not
    comparable. Missing components are zero (12.9 = 12.9.0 = 12.9 GA)."""
    ka, kb = version_key(a), version_key(b)
    if ka is None or kb is None:
        return None
    return _cmp(ka, kb)


def _version(raw: str) -> Version:
    raw = raw.strip()
    wild = re.fullmatch(r"v?(\d+(?:\.\d+)*)\.xx?", raw)
    if wild:
        return Version(raw, version_key(wild.group(1)), wildcard=True)
    return Version(_display(raw), version_key(raw))


def _display(raw: str) -> str:
    return re.sub(r" update (\d+)", r" Update \1", raw)


def _series_range(v: Version) -> VersionRange:
    """ "1.6.x" (or "All 2.10 versions") as [1.6, 1.7): exact, not a guess, in numeric order."""
    if v.key is None:
        return VersionRange(Bound(v, True), Bound(v, True))
    nxt = v.key[:-1] + (v.key[-1] + 1,)
    top = Version(".".join(map(str, nxt)), nxt)
    base = Version(".".join(map(str, v.key)), v.key)
    return VersionRange(Bound(base, True), Bound(top, False))


def _exact(v: Version) -> VersionRange:
    if v.wildcard:
        return _series_range(v)
    return VersionRange(Bound(v, True), Bound(v, True))


# -- platforms --------------------------------------------------------------------------------


def parse_platform(text: str) -> Platform:
    """A platform/architecture text: "Linux(R580)", "Windows(R535 vGPU 16)", "Linux(Gaming)"."""
    s = " ".join(str(text).split())[:_MAX_TEXT]
    m = _PLATFORM.fullmatch(s)
    os_text = (m.group("os") if m else s).strip()
    inner = (m.group("inner") or "").strip() if m else ""
    os_low = os_text.lower()
    # the OS only where every platform named is one: "Windows, Linux" or a hypervisor list
    # (vSphere, Citrix) says nothing about the guest
    items = [i.strip() for i in re.split(r",|/| and ", os_low) if i.strip()]
    items = [i for i in items if not i.isdigit()]  # "Windows 10 and 11": 11 is a version
    os_name = None
    if items and all(re.match(r"linux|ubuntu|red hat enterprise linux|rhel", i) for i in items):
        os_name = "linux"
    elif items and all(i.startswith("windows") for i in items):
        os_name = "windows"
    branch = line = major = extra = None
    im = _PLATFORM_INNER.fullmatch(inner)
    if im:
        branch = "R" + im.group("branch")
        if im.group("vgpu"):
            line, major = "vgpu", im.group("major")
        elif im.group("gaming"):
            line = "gaming"
    elif inner.lower() == "gaming":
        line = "gaming"
    elif inner:
        extra = inner
    return Platform(
        text=s, os=os_name, branch=branch, branch_line=line, vgpu_major=major, extra=extra
    )


# -- normalisation ----------------------------------------------------------------------------


def nvidia_slug(text: str) -> str:
    """NVIDIA's slugification of a version text as its CSAF CPEs carry it (lowercase, spaces and
    dots to "_", other punctuation dropped), to pair a CSAF slug with its CVE Record text."""
    s = str(text).lower().replace("\t", "")
    s = re.sub(r"[ .]", "_", s)
    return re.sub(r"[^a-z0-9_]", "", s)


def _is_slug(s: str) -> bool:
    return re.fullmatch(r"[a-z0-9_]+", s) is not None and ("_" in s or not s.isdigit())


def _slug_to_text(s: str) -> str:
    s = s.replace("laterbfb", "later_,_bfb")
    raw = s.split("_")
    toks: list[str] = []
    for i, t in enumerate(raw):
        if not t:
            if 0 < i < len(raw) - 1 and raw[i - 1]:
                toks.append("-")
            continue
        m = _GLUED.match(t)
        if m:
            toks += [m.group(1), m.group(2)] + ([m.group(3)] if m.group(3) else [])
            continue
        m = re.fullmatch(r"vgpu(\d+)", t)
        if m:
            toks += ["vgpu", m.group(1)]
            continue
        m = _GLUED_UPDATE.match(t)
        if m:
            toks += [m.group(1), "update", m.group(2)]
            continue
        toks.append(t)
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        starts = re.fullmatch(r"(?:v|r)?\d+", t) or (
            t == "xx" and i + 1 < len(toks) and toks[i + 1].isdigit()
        )
        if not starts:
            out.append(t)
            i += 1
            continue
        ver = t
        i += 1
        while i < len(toks) and re.fullmatch(r"\d+(?:x+|rc\d+|[a-z])?|xx?", toks[i]):
            ver += "." + toks[i]
            i += 1
            if not ver[-1].isdigit():
                break
        out.append(ver)
    return " ".join(out)


def _text_to_norm(s: str) -> str:
    s = s.lower()
    s = re.sub(r"(\d)u(\d+)\b", r"\1 update \2", s)
    s = re.sub(r"([a-z])_(?=[a-z0-9])", r"\1 ", s)
    s = re.sub(r"\s*,\s*", " , ", s)
    s = re.sub(r"[()\[\]:;]", " ", s)
    s = re.sub(r"\s+-\s+", " - ", s)
    return " ".join(s.split())


# -- the grammar ------------------------------------------------------------------------------


@dataclass
class _State:
    conditions: list[Condition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    product_line: str | None = None
    vgpu_release: str | None = None
    release: str | None = None
    commit: str | None = None
    commit_fixed: bool = False
    driver: bool = False
    slug: bool = False


_CONDITIONS: tuple[tuple[re.Pattern[str], str, str | None], ...] = (
    (re.compile(r"\s*only when cdi is enabled"), "cdi_mode", None),
    (
        re.compile(
            r"\s*only when device\W?list\W?strategy is cdi\W?annotations and\W?or cdi\W?cri"
        ),
        "device_list_strategy",
        "cdi-annotations|cdi-cri",
    ),
    (
        re.compile(
            r"\s*(?:to )?for support of (?:geforce )?(?:desktop )?kepler(?:\W?series)?"
            r"(?: desktop)?(?: gpus)?"
        ),
        "gpu_architecture",
        "kepler-desktop",
    ),
    (re.compile(r"\s*\blts\b"), "release_stream", "lts"),
)
_NOTES = (
    re.compile(r"\s*\bto be published by end of [a-z]+"),
    re.compile(r"\s*\bprod2 hotfix"),
    re.compile(r"\s*\bdev drop"),
)


def _extract(s: str, st: _State) -> str:
    m = re.search(rf"\s*cdi mode only for versions prior to ({_VER})", s)
    if m:
        st.conditions.append(Condition("cdi_mode", None, _version(m.group(1)).normal))
        s = s[: m.start()] + s[m.end() :]
    for rx, name, value in _CONDITIONS:
        if rx.search(s):
            s = rx.sub("", s)
            if all(c.name != name for c in st.conditions):
                st.conditions.append(Condition(name, value))
    for rx in _NOTES:
        m = rx.search(s)
        if m:
            st.notes.append(m.group(0).strip())
            s = s[: m.start()] + s[m.end() :]
    return " ".join(s.split())


def _secondary(s: str, st: _State) -> tuple[str, bool | None]:
    """Split the vGPU / dated-release clause off; returns (head, its inclusivity or None)."""
    incl: bool | None = None
    found = 0
    while True:
        m = re.search(rf"(?:^| )({_SECONDARY.pattern})$", s)
        if m is None or m.start(1) == 0 and not m.group("rel"):
            break
        found += 1
        rel = m.group("rel")
        this = _INCL[rel] if rel else None
        if m.group("vgpu"):
            if st.vgpu_release and st.vgpu_release != m.group("vgpu"):
                st.review.append(
                    f"two vGPU releases named ({m.group('vgpu')} and {st.vgpu_release})"
                )
            st.vgpu_release = st.vgpu_release or m.group("vgpu")
        else:
            month = _MONTH_NAMES[m.group("month")[:3]]
            st.release = f"{month} {m.group('year')}" + (" Cloud Gaming" if m.group("cg") else "")
        if this is not None:
            if incl is not None and incl != this:
                st.review.append("the release clauses disagree on inclusivity")
            incl = this if incl is None else incl
        s = s[: m.start()].strip()
        if found > 2:
            break
    return s, incl


_TARGET = re.compile(
    rf"^(?P<prod>{_WORDS} )??(?P<ver>{_VER})(?: (?:and|,) (?P<ver2>{_VER}))?(?: release| to)?$"
)
_OPAQUE = re.compile(r"^(?P<prod>" + _WORDS + r" )??(?P<ver>[a-z0-9][a-z0-9._-]*\d[a-z0-9._-]*)$")


def _product(words: str | None) -> str | None:
    w = (words or "").strip()
    return w if w and w not in ("driver", "drivers") else None


def _list(s: str) -> list[str] | None:
    items = [i.strip() for i in re.split(r" , | and |, | ", s) if i.strip()]
    if len(items) < 2 or not all(_VER_RE.fullmatch(i) for i in items):
        return None
    return items


def _grammar(s: str, st: _State, sec_incl: bool | None) -> tuple[VersionRange, ...] | None:
    """The version ranges of a normalised head text, None when no rule reads it."""
    # commits: "all versions that do not include (code) commit X" / "... that includes commit X"
    m = re.fullmatch(r"all versions that do not include (?:code )?commit ([0-9a-f]{7,40})", s)
    if m:
        st.commit = m.group(1)
        return ()
    m = re.fullmatch(r"any code branch that includes (?:code )?commit ([0-9a-f]{7,40})", s)
    if m:
        st.commit, st.commit_fixed = m.group(1), True
        return ()
    # a bare version with a release clause: "450.203 all versions prior to and including vGPU..."
    if sec_incl is not None and _VER_RE.fullmatch(s):
        return (VersionRange(None, Bound(_version(s), sec_incl)),)
    # "[product] VER(S) and earlier / and later", "X to Y", lists, a bare version
    m = re.fullmatch(
        rf"(?:(?P<prod>{_WORDS}) )??(?P<vers>{_VER}(?:(?: ,| and)? {_VER})*) "
        r"(?P<dir>and earlier|and prior versions|and prior releases|and older|or earlier"
        r"|and later|or later|and newer|or newer)",
        s,
    )
    if m:
        st.product_line = st.product_line or _product(m.group("prod"))
        items = _list(m.group("vers")) or [m.group("vers")]
        vs = [_version(i) for i in items]
        keyed = [v for v in vs if v.key is not None]
        if len(keyed) != len(vs):
            if len(vs) > 1:
                return None
            keyed = vs
        top = max(keyed, key=lambda v: v.key or ()) if len(keyed) > 1 else keyed[0]
        low = min(keyed, key=lambda v: v.key or ()) if len(keyed) > 1 else keyed[0]
        if m.group("dir").endswith(("later", "newer")):
            return (VersionRange(Bound(low, True), None),)
        return (VersionRange(None, Bound(top, True)),)
    # "[all] [SERIES] [what] [versions] REL TARGET" and "[all] [what] versions"
    m = re.fullmatch(
        rf"(?P<pre>.*?)\s*\b(?P<rel>{_REL}|after)\b\s*(?P<target>.+?)(?: to)?",
        s,
    )
    if m:
        pre, rel, target = m.group("pre"), m.group("rel"), m.group("target")
        series, what = _prefix(pre)
        if what is False:
            return None
        st.driver = st.driver or what == "driver"
        st.product_line = st.product_line or _product(what if isinstance(what, str) else None)
        tm = _TARGET.fullmatch(target)
        if tm:
            prod, ver, ver2 = tm.group("prod"), tm.group("ver"), tm.group("ver2")
        else:
            om = _OPAQUE.fullmatch(target)
            if om is None:
                return None
            # "S2W_3A13", "OTA0": a label kept whole, as written, not comparable
            prod, ver, ver2 = None, target.replace(" ", "_"), None
        if prod:
            st.product_line = st.product_line or prod.strip()
        v = _version(ver)
        if rel == "up to":
            st.review.append("'up to' without 'and including': whether the bound is affected")
        if sec_incl is not None and sec_incl != _INCL.get(rel, sec_incl):
            st.review.append("the version bound and the release clause disagree on inclusivity")
        if rel == "after":
            return (VersionRange(Bound(v, False), None),)
        lower = _series_range(series).lower if series is not None else None
        ranges = [VersionRange(lower, Bound(v, _INCL[rel]))]
        if ver2 is not None:
            st.review.append(
                "several fixed versions in one text: the release line each one fixes is not said"
            )
            ranges.append(VersionRange(lower, Bound(_version(ver2), _INCL[rel])))
        return tuple(ranges)
    # "all [SERIES] [what] versions" with no bound
    m = re.fullmatch(r"all (?P<rest>.*?)\s*versions?", s)
    if m:
        series, what = _prefix("all " + m.group("rest") + " versions")
        if what is False:
            return None
        st.driver = st.driver or what == "driver"
        st.product_line = st.product_line or _product(what if isinstance(what, str) else None)
        return (_series_range(series) if series is not None else VersionRange(),)
    m = re.fullmatch(
        rf"(?:(?P<p1>{_WORDS}) )??(?P<a>{_VER}) (?:to|through|-) "
        rf"(?:(?P<p2>{_WORDS}) )??(?P<b>{_VER})",
        s,
    )
    if m:
        st.product_line = st.product_line or _product(m.group("p1"))
        a, b = _version(m.group("a")), _version(m.group("b"))
        lo = _series_range(a).lower if a.wildcard else Bound(a, True)
        up = _series_range(b).upper if b.wildcard else Bound(b, True)
        return (VersionRange(lo, up),)
    m = re.fullmatch(
        rf"(?:(?P<prod>versions|{_WORDS}) )??(?P<vers>{_VER}(?:(?: ,| and)? {_VER})+)"
        r"(?: (?P<label>latest))?",
        s,
    )
    if m:
        if m.group("label"):
            st.notes.append(m.group("label"))
        listed = _list(m.group("vers"))
        if listed is None:
            return None
        if st.slug and not re.search(r" , | and ", m.group("vers")):
            # a slug lost the commas: "1_6_x_1_7_x" still splits at each "x", "1_3_01_3_1" not
            if not all(i.endswith("x") for i in listed[:-1]):
                return None
        if m.group("prod") != "versions":
            st.product_line = st.product_line or _product(m.group("prod"))
        return tuple(_exact(_version(i)) for i in listed)
    m = re.fullmatch(rf"(?:(?P<prod>{_WORDS}) )??(?P<ver>{_VER})(?: (?P<label>{_WORDS}))?", s)
    if m:
        st.product_line = st.product_line or _product(m.group("prod"))
        if m.group("label"):
            if m.group("label") in ("release",):
                pass
            else:
                st.notes.append(m.group("label"))
        v = _version(m.group("ver"))
        hy = re.fullmatch(r"(\d+\.\d+)-(\d+\.\d+)", m.group("ver"))
        if hy and (compare_versions(hy.group(1), hy.group(2)) or 0) < 0:
            # "9.0-9.2": two versions of one shape read as a range, not as a build suffix
            return (
                VersionRange(
                    Bound(_version(hy.group(1)), True), Bound(_version(hy.group(2)), True)
                ),
            )
        return (_exact(v),)
    m = re.fullmatch(rf"(?P<prod>{_WORDS}) (?P<a>{_VER})(?: ,)? (?P=prod) (?P<b>{_VER})", s)
    if m:
        # "Base Command Manager 3, Base Command Manager 10": one product named twice
        st.product_line = st.product_line or _product(m.group("prod"))
        return (_exact(_version(m.group("a"))), _exact(_version(m.group("b"))))
    m = re.fullmatch(rf"(?P<prod>{_WORDS}) - (?P<ver>{_VER})", s)
    if m:
        st.product_line = st.product_line or _product(m.group("prod"))
        return (_exact(_version(m.group("ver"))),)
    m = _OPAQUE.fullmatch(s)
    if m and " " not in m.group("ver"):
        # "OTA0", "S2W_3A13": a release label, kept as an opaque (not comparable) version
        st.product_line = st.product_line or _product(m.group("prod"))
        return (_exact(Version(m.group("ver"), None)),)
    return None


def _prefix(pre: str) -> tuple[Version | None, str | None | Literal[False]]:
    """The words before a relation: ("all 2.5 versions" -> series 2.5), ("all bmc firmware
    versions" -> what "bmc firmware"); what is False when the prefix is not understood."""
    pre = pre.strip()
    if not pre:
        return None, None
    m = re.fullmatch(rf"(?:all )?(?:(?P<series>{_VER}) )?(?P<what>{_WORDS})?", pre)
    if m is None:
        m2 = re.fullmatch(rf"(?P<series>{_VER})", pre)
        if m2 is None:
            return None, False
        return _version(m2.group("series")), None
    series = _version(m.group("series")) if m.group("series") else None
    what = (m.group("what") or "").strip()
    what = re.sub(r"\s*\b(?:versions?|releases?)$", "", what).strip()
    if re.fullmatch(r"(?:all )?(?:driver|drivers)?", what):
        what = "driver" if what.endswith(("driver", "drivers")) else ""
    if series is not None and not series.wildcard:
        series = Version(series.text + ".x", series.key, wildcard=True)
    return series, (what or None)


# -- the entry point --------------------------------------------------------------------------


def parse_version_text(text: str, *, platform: str | None = None) -> ParsedVersion:
    """Parse one NVIDIA version text (original or CPE slug); ``platform`` ("Linux(R535)")
    adds the branch scope a CVE Record keeps beside the text. Never raises on a str."""
    try:
        return _parse(text, platform)
    except (ValueError, IndexError, KeyError, OverflowError, RecursionError) as exc:
        # a rule that trips on a text no fixture has is an unparsed text, never a crash
        return ParsedVersion(text=str(text), parsed=False, reason=f"parser error: {exc!r}")


def _parse(text: str, platform: str | None) -> ParsedVersion:
    if not isinstance(text, str):
        return ParsedVersion(text=repr(text), parsed=False, reason="not a string")
    raw = " ".join(text.split())
    if not raw:
        return ParsedVersion(text=text, parsed=False, reason="empty")
    if len(raw) > _MAX_TEXT:
        return ParsedVersion(text=text, parsed=False, reason=f"longer than {_MAX_TEXT} characters")
    if re.fullmatch(r"[^()]*\((?:R\d{3}|Gaming)[^()]*\)", raw, re.IGNORECASE):
        return ParsedVersion(
            text=text, parsed=False, reason="a platform, not a version (see parse_platform)"
        )
    st = _State()
    os_name = branch = line = vgpu_major = None
    form: Form = "slug" if _is_slug(raw.lstrip("_")) else "text"
    if form == "slug":
        body = raw.lstrip("_")
        pm = _DRIVER_PREFIX.match(body) or _HOST_PREFIX.match(body)
        if pm:
            os_name, branch = pm.groupdict().get("os"), "R" + pm.group("branch")
            line = "vgpu" if pm.group("line") else ("gaming" if pm.group("gaming") else None)
            vgpu_major = pm.group("vgpu")
            if pm.group("product"):
                st.product_line = pm.group("product").replace("_", " ")
            body = body[pm.end() :]
        norm = _slug_to_text(body)
        st.slug = True
    else:
        norm = _text_to_norm(raw)
    if platform is not None:
        p = parse_platform(platform)
        if branch is not None and p.branch is not None and p.branch != branch:
            st.review.append(f"the text says {branch}, the platform {p.branch}")
        os_name = os_name or p.os
        branch = branch or p.branch
        line = line or p.branch_line
        vgpu_major = vgpu_major or p.vgpu_major
    norm = _extract(norm, st)
    head, sec_incl = _secondary(norm, st)
    if re.search(rf"\b(?:{_MONTHS}) \d", head):
        # "available the week of June 29 2023": a date where a version should be
        return ParsedVersion(
            text=text, parsed=False, form=form, reason="a date, not a version", branch=branch
        )
    ranges = _grammar(head, st, sec_incl) if head else None
    if ranges is not None and st.slug and any(len(_keys(r)) > _MAX_SLUG_PARTS for r in ranges):
        ranges, why = None, "the slug lost where one version ends and the next begins"
    else:
        why = "no rule reads this text"
    if ranges is None:
        return ParsedVersion(
            text=text,
            parsed=False,
            form=form,
            reason=why,
            os=os_name,
            branch=branch,
            branch_line=line,
        )
    scheme: Scheme = "generic"
    if branch is not None or st.driver or st.vgpu_release or st.release:
        scheme = "driver"
    if st.product_line and "cuda toolkit" in st.product_line:
        scheme = "cuda_toolkit"
    if st.vgpu_release or st.release:
        line = line or ("vgpu" if st.vgpu_release else None)
    _check_scope(ranges, st, branch, vgpu_major)
    if any(not r.comparable for r in ranges):
        st.review.append("a bound is not a comparable version")
    return ParsedVersion(
        text=text,
        parsed=True,
        form=form,
        review="; ".join(dict.fromkeys(st.review)) or None,
        ranges=ranges,
        scheme=scheme,
        product_line=st.product_line,
        os=os_name,
        branch=branch,
        branch_line=line,
        vgpu_release=st.vgpu_release,
        release=st.release,
        conditions=tuple(st.conditions),
        commit=st.commit,
        commit_fixed=st.commit_fixed,
        notes=tuple(st.notes),
    )


def _keys(rng: VersionRange) -> tuple[int, ...]:
    """The longest key of a range's bounds (empty when none is comparable)."""
    keys = [b.version.key for b in (rng.lower, rng.upper) if b is not None and b.version.key]
    return max(keys, key=len) if keys else ()


def _check_scope(
    ranges: Iterable[VersionRange], st: _State, branch: str | None, vgpu_major: str | None
) -> None:
    """The vendor's inconsistencies, for review: a version off its branch, a vGPU release of
    another vGPU line."""
    if branch is not None:
        r = int(branch[1:])
        for rng in ranges:
            for b in (rng.lower, rng.upper):
                if b is None or not b.version.key:
                    continue
                if not r <= b.version.key[0] < r + _BRANCH_SPAN:
                    st.review.append(f"version {b.version.text} is not on branch {branch}")
    if vgpu_major and st.vgpu_release and st.vgpu_release.split(".")[0] != vgpu_major:
        st.review.append(f"vGPU {st.vgpu_release} is not on the vGPU {vgpu_major} line")


# -- matching helpers -------------------------------------------------------------------------


def evaluate(parsed: ParsedVersion, version: str, *, branch: str | None = None) -> Verdict:
    """Whether an installed ``version`` lies in the text's ranges, branch-aware.

    A text scoped to a branch says nothing about another branch ("other_branch"), and with an
    unknown installed branch nothing at all ("unknown"): the branch is never taken from the
    version's leading number. A text under review is never decided ("review"); conditions are
    the caller's to decide.
    """
    if not parsed.parsed or not parsed.ranges:
        return "unknown"
    if parsed.branch is not None:
        if branch is None:
            return "unknown"
        if _norm_branch(branch) != parsed.branch:
            return "other_branch"
    if parsed.review is not None:
        return "review"
    results = [r.contains(version) for r in parsed.ranges]
    if any(r is True for r in results):
        return "in_range"
    if all(r is False for r in results):
        return "out_of_range"
    return "unknown"


def _norm_branch(branch: str) -> str:
    b = branch.strip().upper()
    return b if b.startswith("R") else "R" + b


def fix_gap(affected: ParsedVersion, fixed: ParsedVersion) -> str | None:
    """A review reason when an affected range and its fixed version leave a version with no
    status ("prior to 12.4", fixed in 12.4 Update 1: 12.4 GA is neither), else None."""
    if not (affected.parsed and fixed.parsed and affected.ranges and fixed.ranges):
        return None
    uppers = [r.upper for r in affected.ranges if r.upper is not None]
    fixes = [r.lower for r in fixed.ranges if r.lower is not None]
    if len(uppers) != 1 or len(fixes) != 1:
        return None
    up, fx = uppers[0], fixes[0]
    if up.version.key is None or fx.version.key is None:
        return None
    c = _cmp(fx.version.key, up.version.key)
    if not up.inclusive and c > 0:
        return (
            f"affected is below {up.version.text} but the fix is {fx.version.text}: "
            f"{up.version.text} itself has no status"
        )
    if up.inclusive and c <= 0:
        return f"the fix {fx.version.text} is inside the affected range (up to {up.version.text})"
    return None


def merge_reviews(parsed: ParsedVersion, reason: str | None) -> ParsedVersion:
    """``parsed`` with one more review reason (the importer adds a ``fix_gap`` finding)."""
    if reason is None:
        return parsed
    review = f"{parsed.review}; {reason}" if parsed.review else reason
    return replace(parsed, review=review)
