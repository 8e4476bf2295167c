"""Which advisories an asset carries: a bulletin's product statuses against the products and
libraries found on one asset, answered per (vulnerability, installed product).

Pure: no files, no database. The service (app/domain/vulnerabilities.py) builds the inputs
from stored rows; the data the matcher needs beyond a bulletin (product names to product keys,
the component a CUDA Toolkit CVE is in, conditions stated only in a description, component
versions to toolkit releases) is ``data/matching.yaml``, each entry with its source.

Rules (docs/advisories.md, "Matching"):
- a status scoped to a driver branch judges only drivers of that branch; a driver on a branch
  older than the newest one listed, and not listed itself, is affected (``inferred``);
- a CUDA Toolkit CVE whose flaw is in one component (cuobjdump, nvdisasm, nvJPEG) affects an
  asset only through that component; an asset holding the toolkit's libraries but not the
  component is ``not_affected`` / ``component_not_present``; an asset holding nothing of the
  product gets no finding at all;
- a vendor text under review decides only versions that lie inside it whatever the reading;
  any other version is ``affected`` with ``review`` set (fail safe: a person decides);
- a condition the asset's facts cannot decide leaves the finding ``affected`` with the
  condition named in ``conditions_unevaluated`` (the facts and their sources:
  scanner/advisories/conditions.py, docs/advisories.md "Conditions");
- a fixed version whose fix a configuration switches off again (``fix_disabled_by``) is
  ``affected`` when that configuration holds or is undecided;
- a host's driver is judged as the vGPU guest driver when its ``vgpu_guest`` fact is true, as
  the datacenter driver when false; undecided, the datacenter answer stands unless the vGPU
  guest line would be affected where it is not: then ``affected``, ``vgpu_guest`` unevaluated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from scanner.advisories.conditions import VGPU_GUEST, VGPU_HOST
from scanner.advisories.versions import compare_versions, version_key

if TYPE_CHECKING:
    from scanner.advisories.package_match import InstalledPackage

Status = Literal["affected", "not_affected", "fixed", "under_investigation"]

#: library families that are part of a CUDA Toolkit release (scanner/detect/classifiers.py);
#: cuDNN, NCCL, TensorRT and the driver's libraries are not
TOOLKIT_FAMILIES = frozenset(
    {
        "cudart",
        "cublas",
        "cufft",
        "curand",
        "cusolver",
        "cusparse",
        "nvrtc",
        "nvjitlink",
        "nvjpeg",
    }
)
#: the product keys that are parts of a CUDA Toolkit release
TOOLKIT_PARTS = frozenset(
    {"nvcc", "ptxas", "cuobjdump", "nvdisasm", "compute-sanitizer", "cuda-gdb", "nvjpeg"}
)
_AFFECTED = ("known_affected", "first_affected", "last_affected")
_FIXED = ("fixed", "first_fixed")


@dataclass(frozen=True)
class Installed:
    """One product found on an asset (scanner.model.Product as stored)."""

    key: str
    version: str | None
    toolkit: str | None = None
    line: str | None = None
    branch: str | None = None
    paths: tuple[str, ...] = ()
    sha256: str | None = None
    owner: str | None = None


@dataclass(frozen=True)
class AssetFacts:
    """What is known of one asset: its products, its GPU library families with versions, the
    packages OSV documents may name (``scanner.advisories.package_match``), its OS, and the
    configuration facts conditions can be decided by ("cdi_mode": "true")."""

    products: tuple[Installed, ...] = ()
    libraries: tuple[tuple[str, str | None], ...] = ()
    os: str = "linux"
    facts: Mapping[str, str] = field(default_factory=dict)
    packages: tuple[InstalledPackage, ...] = ()


@dataclass(frozen=True)
class StatusEntry:
    """One product status of a vulnerability, as stored (``ProductStatus`` fields)."""

    product: str
    status: str
    version_text: str | None
    parsed: Mapping[str, Any] | None
    platform: str | None = None
    justification: str | None = None
    #: an OSV statement's ecosystem ("PyPI", "Debian:12"): ``product`` is then a package name
    #: and ``vers`` its ranges; None for a bulletin's statement
    ecosystem: str | None = None
    vers: tuple[str, ...] = ()


def status_entry(status: Any, fmt: str) -> StatusEntry:
    """The matcher's view of a stored or read product status (``ProductStatus`` or its row)
    of a document of format ``fmt`` (an OSV document's statements name packages)."""
    osv = fmt == "osv"
    return StatusEntry(
        product=status.product,
        status=status.status,
        version_text=status.version_text,
        parsed=status.parsed,
        platform=status.platform,
        justification=status.justification,
        ecosystem=(status.platform or None) if osv else None,
        vers=tuple(status.vers or ()) if osv else (),
    )


@dataclass(frozen=True)
class Finding:
    """The answer for one (vulnerability, installed product) of an asset."""

    cve: str
    status: Status
    product: str
    component: str | None = None
    installed: str | None = None
    justification: str | None = None
    affected_text: str | None = None
    fixed_in: str | None = None
    #: why a person must decide (the vendor's text, an unmappable version); never a pass
    review: str | None = None
    #: decided by a rule rather than a statement (an older branch with no fix listed)
    inferred: bool = False
    conditions_unevaluated: tuple[str, ...] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cve": self.cve,
            "status": self.status,
            "product": self.product,
            "component": self.component,
            "installed": self.installed,
            "justification": self.justification,
            "affected_text": self.affected_text,
            "fixed_in": self.fixed_in,
            "review": self.review,
            "inferred": self.inferred,
            "conditions_unevaluated": list(self.conditions_unevaluated),
            "evidence": dict(self.evidence),
        }


# -- the data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatchingData:
    products: Mapping[str, str]
    components: Mapping[str, tuple[str, ...]]
    #: CVE -> (condition name, the value that makes it hold, source)
    conditions: Mapping[str, tuple[tuple[str, str, str], ...]]
    #: (component key, component version) -> toolkit release
    toolkit_components: Mapping[tuple[str, str], str]
    #: CVE -> the configurations that switch its fix off, as ``conditions``
    fix_disabled_by: Mapping[str, tuple[tuple[str, str, str], ...]] = field(default_factory=dict)


@cache
def matching_data() -> MatchingData:
    """The reviewed data table ``data/matching.yaml``."""
    from importlib import resources

    from scanner.loaders import load_yaml

    text = resources.files("scanner.advisories").joinpath("data/matching.yaml").read_text("utf-8")
    doc = load_yaml(text)
    comps: dict[str, tuple[str, ...]] = {}
    for e in doc.get("components") or []:
        comps[str(e["cve"])] = tuple(str(c) for c in e["components"])
    conds: dict[str, list[tuple[str, str, str]]] = {}
    for e in doc.get("conditions") or []:
        conds.setdefault(str(e["cve"]), []).append(
            (str(e["name"]), str(e["value"]), str(e["source"]))
        )
    reopen: dict[str, list[tuple[str, str, str]]] = {}
    for e in doc.get("fix_disabled_by") or []:
        reopen.setdefault(str(e["cve"]), []).append(
            (str(e["name"]), str(e["value"]), str(e["source"]))
        )
    tk: dict[tuple[str, str], str] = {}
    for e in doc.get("toolkit_components") or []:
        for comp, ver in (e.get("versions") or {}).items():
            tk[(str(comp), str(ver))] = str(e["release"])
    return MatchingData(
        products={str(k).lower(): str(v) for k, v in (doc.get("products") or {}).items()},
        components=comps,
        conditions={k: tuple(v) for k, v in conds.items()},
        toolkit_components=tk,
        fix_disabled_by={k: tuple(v) for k, v in reopen.items()},
    )


def product_key(name: str, data: MatchingData | None = None) -> str | None:
    """The product key of a bulletin's product name, None when the table lacks it."""
    d = data or matching_data()
    return d.products.get(" ".join(name.split()).lower())


# -- matching ---------------------------------------------------------------------------------


def product_keys(asset: AssetFacts) -> set[str]:
    """The bulletin product keys whose statements may concern an asset of these facts: its own,
    the CUDA Toolkit for its parts and libraries, the vGPU guest line for its driver."""
    keys = {p.key for p in asset.products}
    if keys & TOOLKIT_PARTS or any(f in TOOLKIT_FAMILIES for f, _ in asset.libraries):
        keys.add("cuda-toolkit")
    if "driver" in keys:
        keys |= {"vgpu-guest-driver", "vgpu-manager"}
    return keys


def match(
    cve: str,
    statuses: Sequence[StatusEntry],
    asset: AssetFacts,
    data: MatchingData | None = None,
) -> list[Finding]:
    """The findings of one vulnerability on one asset (empty: it names nothing the asset
    holds)."""
    d = data or matching_data()
    by_key: dict[str, list[StatusEntry]] = {}
    osv = [s for s in statuses if s.ecosystem is not None]
    for s in statuses:
        if s.ecosystem is not None:
            continue  # an OSV statement names a package, judged below
        key = product_key(s.product, d)
        if key is not None and _os_applies(s, asset.os):
            by_key.setdefault(key, []).append(s)
    findings: list[Finding] = []
    extra_conditions = d.conditions.get(cve, ())
    for key, entries in by_key.items():
        if key == "cuda-toolkit" and cve in d.components:
            findings += _component_findings(cve, entries, by_key, asset, d, extra_conditions)
            continue
        if key in ("nvjpeg",) and "cuda-toolkit" in by_key and cve in d.components:
            continue  # judged with the toolkit's statement above
        if key == "driver":
            continue  # the host's driver, judged below on the line its vGPU fact names
        for p in asset.products:
            if p.key != key:
                continue
            if key == "vgpu-guest-driver":  # a product reported as such: branch-aware too
                f = _driver(cve, entries, p, asset, extra_conditions)
                findings.append(_replace(f, product=key))
            else:
                findings.append(
                    _judge(cve, entries, p, p.version, key, None, asset, extra_conditions)
                )
    findings += _drivers(cve, by_key, asset, extra_conditions)
    if osv:
        from scanner.advisories.package_match import package_findings

        findings += package_findings(cve, osv, asset.packages, asset.products)
    reopen = d.fix_disabled_by.get(cve)
    if reopen:
        # a configuration that switches the fix off reopens it whoever stated the fix
        findings = [_fix_disabled(f, reopen, asset, extra_conditions) for f in findings]
    return findings


def _drivers(
    cve: str,
    by_key: Mapping[str, list[StatusEntry]],
    asset: AssetFacts,
    extra: Sequence[tuple[str, str, str]],
) -> list[Finding]:
    """The driver products against the datacenter/GeForce lines, the vGPU guest line or the
    vGPU Manager line, as the host's ``vgpu_guest`` and ``vgpu_host`` facts say
    (docs/advisories.md, "Conditions")."""
    host = asset.facts.get(VGPU_HOST)
    is_host = None if host is None else _fact_matches(host, "true")
    if is_host is None and asset.facts.get(VGPU_GUEST) == "true":
        is_host = False  # a vGPU guest is no hypervisor
    manager = by_key.get("vgpu-manager")
    out: list[Finding] = []
    for p in asset.products:
        if p.key != "driver":
            continue
        if is_host:
            if manager:  # a vGPU Manager is judged by its own line only
                f = _driver(cve, manager, p, asset, extra)
                ev = {**f.evidence, "vgpu_host": host}
                out.append(_replace(f, product="vgpu-manager", evidence=ev))
            continue
        found = _not_a_manager(cve, by_key, p, asset, extra)
        if is_host is None and manager:
            found = _undecided(
                found,
                _replace(_driver(cve, manager, p, asset, extra), product="vgpu-manager"),
                VGPU_HOST,
                "vgpu_manager_line",
            )
        out += found
    return out


def _not_a_manager(
    cve: str,
    by_key: Mapping[str, list[StatusEntry]],
    p: Installed,
    asset: AssetFacts,
    extra: Sequence[tuple[str, str, str]],
) -> list[Finding]:
    """A driver that is no vGPU Manager, against the datacenter/GeForce lines or the vGPU
    guest line, as the host's ``vgpu_guest`` fact says."""
    datacenter, guest = by_key.get("driver"), by_key.get("vgpu-guest-driver")
    fact = asset.facts.get(VGPU_GUEST)
    is_guest = None if fact is None else _fact_matches(fact, "true")
    if is_guest:
        if not guest:  # a vGPU guest driver is never judged by the datacenter lines
            return []
        f = _driver(cve, guest, p, asset, extra)
        return [
            _replace(f, product="vgpu-guest-driver", evidence={**f.evidence, "vgpu_guest": fact})
        ]
    mine = [_driver(cve, datacenter, p, asset, extra)] if datacenter else []
    if is_guest is False or not guest:
        return mine
    theirs = _replace(_driver(cve, guest, p, asset, extra), product="vgpu-guest-driver")
    return _undecided(mine, theirs, VGPU_GUEST, "vgpu_guest_line")


def _undecided(mine: list[Finding], theirs: Finding, fact: str, line: str) -> list[Finding]:
    """The answer when the host fact ``fact`` that picks the line is undecided: the answer on
    the line the driver is judged on (``mine``) stands unless the other line (``theirs``) is
    affected where it is not; then ``affected``, ``fact`` unevaluated, the other line's answer
    in the evidence under ``line``: a person must say which line it is."""
    if theirs.status != "affected" or any(f.status == "affected" for f in mine):
        return mine
    base = mine[0] if mine else theirs
    return [
        _replace(
            base,
            status="affected",
            justification=None,
            conditions_unevaluated=tuple(dict.fromkeys((*base.conditions_unevaluated, fact))),
            evidence={
                **base.evidence,
                line: {
                    "status": theirs.status,
                    "affected_text": theirs.affected_text,
                    "fixed_in": theirs.fixed_in,
                    "review": theirs.review,
                },
            },
        )
    ]


def _fix_disabled(
    f: Finding,
    reopen: Sequence[tuple[str, str, str]],
    asset: AssetFacts,
    extra: Sequence[tuple[str, str, str]],
) -> Finding:
    """A fixed finding whose fix a configuration can switch off: fixed only when a decided
    condition says the vulnerable path is not taken, else affected (undecided: named)."""
    if f.status != "fixed":
        return f
    conds, undecided, holds = _decide([*reopen, *extra], asset)
    ev = {**f.evidence, "fix_disabled_by": conds}
    if holds is False:
        return _replace(f, evidence=ev)
    return _replace(f, status="affected", conditions_unevaluated=undecided, evidence=ev)


def _os_applies(s: StatusEntry, os_name: str) -> bool:
    parsed_os = (s.parsed or {}).get("os")
    if parsed_os is not None:
        return bool(parsed_os == os_name)
    platform = (s.platform or "").lower()
    # "Windows" alone (CVE Record platforms, CSAF architectures) names no Linux asset
    return not (platform.startswith("windows") and "linux" not in platform)


def _component_findings(
    cve: str,
    entries: list[StatusEntry],
    by_key: Mapping[str, list[StatusEntry]],
    asset: AssetFacts,
    d: MatchingData,
    extra: Sequence[tuple[str, str, str]],
) -> list[Finding]:
    components = d.components[cve]
    present = [p for p in asset.products if p.key in components]
    out: list[Finding] = []
    for p in present:
        release, how = _toolkit_release(p, d)
        if release is not None:
            f = _judge(cve, entries, p, release, "cuda-toolkit", p.key, asset, extra)
            ev = dict(f.evidence)
            ev["toolkit_release"] = how
            out.append(_replace(f, evidence=ev))
            continue
        own = by_key.get(p.key)
        if own and p.version:
            # a standalone release of the component (nvJPEG 25.03) judged by its own statement
            out.append(_judge(cve, own, p, p.version, p.key, p.key, asset, extra))
            continue
        if p.line:
            out.append(_line_judgement(cve, entries, p, asset, extra))
            continue
        out.append(
            Finding(
                cve=cve,
                status="affected",
                product="cuda-toolkit",
                component=p.key,
                installed=p.version,
                review=(
                    f"{p.key} {p.version or '(version unknown)'} maps to no CUDA Toolkit "
                    "release (no version.json, toolkit package or table row)"
                ),
                evidence=_evidence(p, None),
            )
        )
    if present:
        return out
    holds = [p for p in asset.products if p.key == "cuda-toolkit" or p.key in TOOLKIT_PARTS]
    # the service passes families without versions (a toolkit library's version decides
    # nothing): "cudart", not "cudart ?", which would read as a version the scan missed
    libs = sorted(
        {f"{fam} {ver}" if ver else fam for fam, ver in asset.libraries if fam in TOOLKIT_FAMILIES}
    )
    if not holds and not libs:
        return []
    installed = next((p.version for p in holds if p.key == "cuda-toolkit"), None)
    return [
        Finding(
            cve=cve,
            status="not_affected",
            product="cuda-toolkit",
            component=",".join(components),
            installed=installed,
            justification="component_not_present",
            affected_text=_texts(entries, _AFFECTED),
            fixed_in=_texts(entries, _FIXED),
            evidence={
                "component": list(components),
                "source": "scanner/advisories/data/matching.yaml (the CVE's description)",
                "toolkit_products": sorted(f"{p.key} {p.version or '?'}" for p in holds),
                "toolkit_libraries": libs[:20],
            },
        )
    ]


def _toolkit_release(p: Installed, d: MatchingData) -> tuple[str | None, str]:
    if p.toolkit:
        return p.toolkit, "the toolkit install or package it belongs to"
    if p.version and (p.key, p.version) in d.toolkit_components:
        release = d.toolkit_components[(p.key, p.version)]
        return release, f"{p.key} {p.version} ships in CUDA Toolkit {release} (redistrib table)"
    return None, ""


def _line_judgement(
    cve: str,
    entries: list[StatusEntry],
    p: Installed,
    asset: AssetFacts,
    extra: Sequence[tuple[str, str, str]],
) -> Finding:
    """A tool known only by its release line ("12.4"): decided when every update of the line
    gets the same answer, else for review."""
    line = p.line or ""
    low = _judge(cve, entries, p, f"{line}.0", "cuda-toolkit", p.key, asset, extra)
    high = _judge(cve, entries, p, f"{line}.99", "cuda-toolkit", p.key, asset, extra)
    if low.status == high.status and low.review is None and high.review is None:
        return _replace(low, installed=f"{line} (update unknown)")
    return _replace(
        low,
        status="affected",
        installed=f"{line} (update unknown)",
        review=f"release line {line} without its update: some updates are affected, some not",
    )


def _driver(
    cve: str,
    entries: list[StatusEntry],
    p: Installed,
    asset: AssetFacts,
    extra: Sequence[tuple[str, str, str]],
) -> Finding:
    branch = _branch(p)
    listed = sorted(
        {str(b) for s in entries if (b := (s.parsed or {}).get("branch"))},
        key=lambda b: int(b[1:]) if b[1:].isdigit() else 0,
    )
    scoped = [
        s
        for s in entries
        if (s.parsed or {}).get("branch") is None or (s.parsed or {}).get("branch") == branch
    ]
    if branch is None:
        return Finding(
            cve=cve,
            status="affected",
            product="driver",
            installed=p.version,
            review="the driver's branch is unknown: a branch-scoped statement cannot be applied",
            evidence=_evidence(p, None),
        )
    if any((s.parsed or {}).get("branch") == branch for s in entries):
        return _judge(cve, scoped, p, p.version, "driver", None, asset, extra)
    if not listed:
        return _judge(cve, entries, p, p.version, "driver", None, asset, extra)
    ev = _evidence(p, None)
    ev["branches_listed"] = listed
    newest = int(listed[-1][1:])
    mine = int(branch[1:])
    if mine < newest:
        # NVIDIA lists the branches it fixes; an older one left out gets no fix
        return Finding(
            cve=cve,
            status="affected",
            product="driver",
            installed=p.version,
            inferred=True,
            affected_text=f"{branch} is not listed; the bulletin fixes {', '.join(listed)}",
            fixed_in=_texts(
                [s for s in entries if (s.parsed or {}).get("branch") == listed[-1]], _FIXED
            ),
            evidence=ev,
        )
    return Finding(
        cve=cve,
        status="not_affected",
        product="driver",
        installed=p.version,
        justification="vulnerable_code_not_present",
        inferred=True,
        affected_text=(
            f"{branch} is newer than every branch the bulletin lists ({', '.join(listed)})"
        ),
        evidence=ev,
    )


def _branch(p: Installed) -> str | None:
    """ "R535" from the driver's branch fact; None when it is absent or not of that form (a
    reported value is never trusted to be well formed)."""
    b = (p.branch or "").strip().upper()
    b = b if b.startswith("R") else "R" + b
    return b if re.fullmatch(r"R\d{3,4}", b) else None


def _judge(
    cve: str,
    entries: Sequence[StatusEntry],
    p: Installed,
    version: str | None,
    product: str,
    component: str | None,
    asset: AssetFacts,
    extra: Sequence[tuple[str, str, str]],
) -> Finding:
    """One installed version against a product's statements (already scoped to its branch)."""
    base = Finding(
        cve=cve,
        status="affected",
        product=product,
        component=component,
        installed=p.version
        if component is None or version == p.version
        else f"{p.version} (toolkit {version})",
        evidence=_evidence(p, version),
    )
    if version is None or version_key(version) is None:
        return _replace(base, review=f"installed version {version!r} is not comparable")
    affected = [s for s in entries if s.status in _AFFECTED]
    fixed = [s for s in entries if s.status in _FIXED]
    review: str | None = None
    for s in affected:
        inside, why = _inside(s, version)
        if inside is True:
            conds, unevaluated, holds = _conditions(s, version, asset, extra)
            f = _replace(
                base,
                affected_text=s.version_text,
                fixed_in=_texts(fixed, _FIXED),
                conditions_unevaluated=unevaluated,
                review=why,
            )
            if holds is False:
                # a decided condition that does not hold settles it: an undecided one beside it
                # is moot (its evidence row says asset: null)
                return _replace(
                    f,
                    status="not_affected",
                    justification="vulnerable_code_not_in_execute_path",
                    review=None,
                    conditions_unevaluated=(),
                    evidence={**f.evidence, "range": _vers(s), "conditions": conds},
                )
            return _replace(f, evidence={**f.evidence, "range": _vers(s), "conditions": conds})
        if inside is None:
            review = review or why
    fix = _fixed_by(fixed, version)
    if fix is not None and review is None:
        return _replace(
            base,
            status="fixed",
            fixed_in=fix.version_text,
            affected_text=_texts(affected, _AFFECTED),
            evidence={**base.evidence, "range": _vers(fix)},
        )
    for s in entries:
        if s.status == "known_not_affected" and _names(s, version):
            return _replace(
                base,
                status="not_affected",
                justification=s.justification or "vulnerable_code_not_present",
                affected_text=s.version_text,
            )
        if s.status == "under_investigation" and _names(s, version):
            return _replace(base, status="under_investigation", affected_text=s.version_text)
    if fix is not None:
        return _replace(
            base,
            status="fixed",
            fixed_in=fix.version_text,
            affected_text=_texts(affected, _AFFECTED),
            review=None,
        )
    if not affected:
        return _replace(base, review="the bulletin states no affected range for this product")
    return _replace(
        base,
        affected_text=_texts(affected, _AFFECTED),
        fixed_in=_texts(fixed, _FIXED),
        review=review
        or f"{version} is neither in the affected range nor at or after a fixed version",
    )


def _names(s: StatusEntry, version: str) -> bool:
    """Whether a status names ``version``: a status without a version text names the whole
    product (CSAF lists a product id with no version for "every version")."""
    if s.parsed is None or not s.version_text:
        return True
    return _inside(s, version)[0] is True


def _inside(s: StatusEntry, version: str) -> tuple[bool | None, str | None]:
    """Whether ``version`` lies in the entry's ranges: True, False, or None (undecidable, with
    why). A text under review decides only versions strictly inside its ranges."""
    parsed = s.parsed or {}
    if not parsed.get("parsed"):
        return None, f"the bulletin's text {s.version_text!r} did not parse"
    ranges = parsed.get("ranges") or []
    key = version_key(version)
    if not ranges or key is None:
        return None, f"the bulletin's text {s.version_text!r} gives no comparable range"
    review = parsed.get("review")
    results = [_contains(r, key) for r in ranges]
    if "inside" in results:
        return True, None
    if review is None:
        if "opaque" not in results:
            return ("bound_in" in results), None
    elif all(r == "outside" for r in results):
        return False, None
    return None, f"the vendor's text needs review ({review or 'a bound is not comparable'})"


def _contains(rng: Mapping[str, Any], key: tuple[int, ...]) -> str:
    """ "inside" (strictly), "bound_in" / "bound_out" (on an inclusive / exclusive bound),
    "outside", or "opaque" (a bound is not comparable)."""
    edge = None
    for side in ("lower", "upper"):
        b = rng.get(side)
        if b is None:
            continue
        bk = b.get("key")
        if bk is None:
            return "opaque"
        c = _cmp(key, tuple(bk))
        if c == 0:
            edge = "bound_in" if b.get("inclusive") else "bound_out"
        elif (side == "lower") == (c < 0):
            return "outside"
    return edge or "inside"


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    pa, pb = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (pa > pb) - (pa < pb)


def _fixed_by(fixed: Sequence[StatusEntry], version: str) -> StatusEntry | None:
    """The fixed statement ``version`` is at or after (a fixed text names the first fixed
    version of its scope: "1.17.8" fixes 1.17.8 and later)."""
    best = None
    for s in fixed:
        for r in (s.parsed or {}).get("ranges") or []:
            lo = r.get("lower")
            if lo is None or lo.get("key") is None:
                continue
            c = compare_versions(version, ".".join(str(k) for k in lo["key"]))
            if c is not None and c >= 0:
                best = s
    return best


def _conditions(
    s: StatusEntry, version: str, asset: AssetFacts, extra: Sequence[tuple[str, str, str]]
) -> tuple[list[dict[str, Any]], tuple[str, ...], bool | None]:
    """The conditions that apply to ``version``: (their evidence, the undecided names,
    False when a decided one does not hold)."""
    wanted: list[tuple[str, str, str]] = []
    for c in (s.parsed or {}).get("conditions") or []:
        below = c.get("applies_below")
        if below is not None and (compare_versions(version, below) or 0) >= 0:
            continue
        wanted.append((str(c["name"]), str(c.get("value") or "true"), "the version text"))
    wanted += list(extra)
    return _decide(wanted, asset)


def _decide(
    wanted: Sequence[tuple[str, str, str]], asset: AssetFacts
) -> tuple[list[dict[str, Any]], tuple[str, ...], bool | None]:
    """Each (name, value, source) against the asset's facts: (their evidence, the undecided
    names, False when a decided one does not hold, else None)."""
    out, undecided, holds = [], [], True
    for name, value, source in wanted:
        fact = asset.facts.get(name)
        decided = None if fact is None else _fact_matches(fact, value)
        out.append({"name": name, "value": value, "source": source, "asset": fact})
        if decided is None:
            undecided.append(name)
        elif decided is False:
            holds = False
    return out, tuple(dict.fromkeys(undecided)), (False if not holds else None)


def _fact_matches(fact: str, value: str) -> bool:
    wanted = {v.strip().lower() for v in re.split(r"[|,]", value)}
    have = {v.strip().lower() for v in re.split(r"[|,]", fact)}
    return bool(wanted & have)


def _texts(entries: Iterable[StatusEntry], statuses: Sequence[str]) -> str | None:
    texts = [s.version_text for s in entries if s.status in statuses and s.version_text]
    return "; ".join(dict.fromkeys(texts)) or None


def _vers(s: StatusEntry) -> list[str | None]:
    return [r.get("vers") for r in (s.parsed or {}).get("ranges") or []]


def _evidence(p: Installed, compared: str | None) -> dict[str, Any]:
    ev: dict[str, Any] = {"product": p.key, "version": p.version, "paths": list(p.paths[:20])}
    if compared is not None and compared != p.version:
        ev["compared_as"] = compared
    if p.branch:
        ev["branch"] = p.branch
    if p.sha256:
        ev["sha256"] = p.sha256
    if p.owner:
        ev["package"] = p.owner
    return ev


def _replace(f: Finding, **changes: Any) -> Finding:
    from dataclasses import replace

    if "evidence" not in changes:
        changes["evidence"] = dict(f.evidence)
    return replace(f, **changes)


def worst(findings: Iterable[Finding]) -> Status | None:
    """The asset-level status of one CVE: affected over under_investigation over fixed over
    not_affected; None without findings."""
    order: tuple[Status, ...] = ("affected", "under_investigation", "fixed", "not_affected")
    got = {f.status for f in findings}
    return next((s for s in order if s in got), None)
