"""OSV advisories against the packages of one asset: an OSV document names packages by
ecosystem and name (``PyPI/nvidia-cudnn-cu12``, ``Go/github.com/NVIDIA/nvidia-container-toolkit``,
``Debian:12/nvidia-graphics-drivers``) with ``vers:`` ranges; an asset holds packages by purl.

Pure: no files, no database. ``scanner.advisories.match.match`` calls ``package_findings`` for
the statements of an OSV document; the service, ``gpuprov gate --advisories`` and ``scan
--vex-out`` build ``InstalledPackage`` values with ``package_of``. Rules (docs/advisories.md,
"Matching"): one finding per (vulnerability, installed package), none when the package is
absent; a range or version that cannot be compared gives ``affected`` with ``review``, never a
pass; Debian statements judge the *source* package (what OSV's Debian entries name) at its
version, and only on the release they name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scanner.advisories.ecosystems import (
    ECOSYSTEM_OF,
    SCHEMES,
    VersionError,
    check_version,
    compare,
    contains,
    normalize_name,
    parse_vers,
)
from scanner.advisories.match import Finding, Installed, StatusEntry, worst


@dataclass(frozen=True)
class InstalledPackage:
    """One package of an asset, as an OSV ecosystem names it."""

    #: the purl type and vers scheme: pypi, golang, deb
    scheme: str
    #: the ecosystem's normalized name (PEP 503; a Go module path; a deb binary package)
    name: str
    version: str | None
    purl: str
    #: deb: the source package it was built from and the source's version (dpkg's ``Source:``;
    #: None: the binary's own name and version, as dpkg omits the field then)
    source_name: str | None = None
    source_version: str | None = None
    #: deb: the Debian release from the purl's ``distro`` qualifier ("12"); None: unknown
    release: str | None = None


#: a ``distro`` qualifier of Debian: "debian-12", Trivy's "debian-12.5", "bookworm" is unknown
_DEBIAN_RELEASE = re.compile(r"^debian-(\d+)(?:\.\d+)*$")


def package_of(
    purl: str,
    version: str | None = None,
    *,
    source_name: str | None = None,
    source_version: str | None = None,
) -> InstalledPackage | None:
    """A package an OSV statement may name, from its purl (a version in the purl wins over
    ``version``); None for another purl type, a deb of another distribution than Debian (its
    versions are not Debian's), or a purl that does not parse."""
    from packageurl import PackageURL

    try:
        p = PackageURL.from_string(purl)
    except ValueError:
        return None
    scheme = str(p.type).lower()
    if scheme not in ECOSYSTEM_OF:
        return None
    name = str(p.name)
    if scheme == "golang":
        name = f"{p.namespace}/{name}" if p.namespace else name
    release = None
    if scheme == "deb":
        if str(p.namespace or "").lower() != "debian":
            return None
        qualifiers = p.qualifiers if isinstance(p.qualifiers, dict) else {}
        m = _DEBIAN_RELEASE.match(str(qualifiers.get("distro") or "").lower())
        release = m.group(1) if m else None
        if source_name is None and qualifiers.get("upstream"):
            # Syft's form: upstream=<source>[@<source version>]
            up_name, _, up_version = str(qualifiers["upstream"]).partition("@")
            source_name, source_version = up_name or None, up_version or source_version
    return InstalledPackage(
        scheme=scheme,
        name=normalize_name(scheme, name),
        version=str(p.version) if p.version else version,
        purl=purl,
        source_name=normalize_name(scheme, source_name) if source_name else None,
        source_version=source_version or None,
        release=release,
    )


def product_packages(products: Iterable[Installed]) -> list[InstalledPackage]:
    """The products whose own purl is a package an OSV ecosystem names (the Container
    Toolkit's Go module, the TensorRT-LLM wheel: scanner/detect/products.py), at the product's
    version."""
    from scanner.detect.products import product_row

    out = []
    for p in products:
        try:
            prefix = product_row(p.key).purl
        except KeyError:  # a key a newer scanner wrote
            continue
        if not p.version or not prefix.startswith(("pkg:golang/", "pkg:pypi/")):
            continue
        found = package_of(f"{prefix}@{p.version}")
        if found is not None:
            out.append(found)
    return out


def match_name(p: InstalledPackage) -> str:
    """The name an OSV statement must give to name this package (deb: its source)."""
    return (p.source_name or p.name) if p.scheme == "deb" else p.name


def compared_version(p: InstalledPackage) -> str | None:
    """The version an OSV range is compared with (deb: the source's)."""
    return (p.source_version or p.version) if p.scheme == "deb" else p.version


def entry_key(entry: StatusEntry) -> tuple[str, str, str | None] | None:
    """(scheme, normalized name, release) an OSV statement names; None for another statement."""
    if not entry.ecosystem:
        return None
    base, _, release = entry.ecosystem.partition(":")
    scheme = SCHEMES.get(base)
    if scheme is None:
        return None
    return scheme, normalize_name(scheme, entry.product), release or None


def package_keys(packages: Iterable[InstalledPackage]) -> set[tuple[str, str]]:
    """(scheme, name) an OSV statement must name to concern one of these packages."""
    return {(p.scheme, match_name(p)) for p in packages}


def package_findings(
    cve: str,
    entries: Sequence[StatusEntry],
    packages: Sequence[InstalledPackage],
    products: Sequence[Installed] = (),
) -> list[Finding]:
    """The findings of one vulnerability's OSV statements on an asset's packages (and its
    products that are packages): one per installed (package, version), none for a package no
    statement names (a Debian statement names only its release's packages)."""
    pairs = [(p, found[0]) for p in products if (found := product_packages([p]))]
    by_product = {pp.purl: p for p, pp in pairs}
    groups: dict[tuple[str, str, str | None], list[InstalledPackage]] = {}
    for p in [*packages, *(pp for _, pp in pairs)]:
        groups.setdefault((p.scheme, match_name(p), compared_version(p)), []).append(p)
    keyed = [(k, e) for e in entries if (k := entry_key(e)) is not None]
    out = []
    for (scheme, name, version), held in sorted(groups.items(), key=lambda kv: repr(kv[0])):
        releases = {p.release for p in held}
        release = next(iter(releases)) if len(releases) == 1 else None
        by_release: dict[str | None, list[StatusEntry]] = {}
        for (s, n, rel), e in keyed:
            if s == scheme and n == name and (rel is None or release is None or rel == release):
                by_release.setdefault(rel, []).append(e)
        if not by_release:
            continue
        answers = [
            _answer(cve, scheme, version, held, group, by_product)
            for _, group in sorted(by_release.items(), key=lambda kv: kv[0] or "")
        ]
        out.append(_agree(answers, sorted(str(r) for r in by_release)))
    return out


def _agree(answers: Sequence[Finding], releases: Sequence[str]) -> Finding:
    """One answer of the statements of several Debian releases (the package's own is unknown):
    theirs when they agree, else the worst, for review."""
    first = answers[0]
    if all((a.status, a.review is None) == (first.status, first.review is None) for a in answers):
        return first
    pick = next(a for a in answers if a.status == worst(answers))
    return replace(
        pick,
        status="affected",
        justification=None,
        review=(
            "the package's Debian release is unknown and the statements for "
            f"{', '.join(releases)} disagree"
        ),
    )


def _answer(
    cve: str,
    scheme: str,
    version: str | None,
    held: Sequence[InstalledPackage],
    entries: Sequence[StatusEntry],
    by_product: Mapping[str, Installed],
) -> Finding:
    ranges = [t for e in entries for t in e.vers]
    base = Finding(
        cve=cve,
        status="affected",
        product=_product_name(entries[0], scheme),
        installed=version,
        affected_text=_affected_text(ranges),
        evidence=_evidence(held, version, by_product),
    )
    unknown = [p.release for p in held if p.scheme == "deb" and p.release is None]
    named_releases = sorted({str(e.ecosystem) for e in entries if ":" in str(e.ecosystem)})
    if version is None:
        return replace(base, review="the installed version is unknown")
    try:
        check_version(scheme, version)
    except VersionError as err:
        return replace(base, review=f"the installed version: {err}")
    inside: list[tuple[str, tuple[str, ...]]] = []
    passed: list[str] = []
    reviews: list[str] = []
    for e in entries:
        if not e.vers:
            reason = (e.parsed or {}).get("reason") or "no range and no version listed"
            reviews.append(f"the {e.ecosystem} entry gives no comparable range ({reason})")
        for text in e.vers:
            try:
                vers = parse_vers(text)
                hit = contains(vers, version)
            except VersionError as err:
                reviews.append(str(err))
                continue
            if hit:
                inside.append((text, vers.fixes))
                continue
            passed += [fx for fx in vers.fixes if compare(scheme, version, fx) >= 0]
    if inside:
        later = sorted(
            {fx for _, fixes in inside for fx in fixes if compare(scheme, fx, version) > 0},
            key=_sort_key(scheme),
        )
        review = None
        if unknown and named_releases:
            review = (
                f"the package's Debian release is unknown; the statement is for "
                f"{', '.join(named_releases)}"
            )
        return replace(
            base,
            fixed_in=later[0] if later else None,
            review=review,
            evidence={**base.evidence, "range": [t for t, _ in inside]},
        )
    if reviews:
        return replace(base, review="; ".join(dict.fromkeys(reviews)))
    if passed:
        newest = sorted(set(passed), key=_sort_key(scheme))[-1]
        return replace(
            base, status="fixed", fixed_in=newest, evidence={**base.evidence, "range": ranges}
        )
    return replace(
        base,
        status="not_affected",
        justification="vulnerable_code_not_present",
        evidence={**base.evidence, "range": ranges},
    )


def _sort_key(scheme: str) -> Any:
    from functools import cmp_to_key

    return cmp_to_key(lambda a, b: compare(scheme, a, b))


def _product_name(entry: StatusEntry, scheme: str) -> str:
    eco = entry.ecosystem or ECOSYSTEM_OF[scheme]
    return f"{eco}/{entry.product}"


#: the longest range text kept in ``affected_text`` (an OSV ``versions`` list can name
#: hundreds of releases; the evidence keeps the range that decided)
_MAX_TEXT = 1024


def _affected_text(ranges: Sequence[str]) -> str | None:
    text = "; ".join(ranges)
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def _evidence(
    held: Sequence[InstalledPackage], version: str | None, by_product: Mapping[str, Installed]
) -> dict[str, Any]:
    first = held[0]
    ev: dict[str, Any] = {"package": first.purl, "version": first.version}
    if len(held) > 1:
        ev["packages"] = sorted({p.purl for p in held})[:20]
    if version is not None and version != first.version:
        ev["compared_as"] = version
    if first.scheme == "deb":
        ev["source_package"] = match_name(first)
    product = by_product.get(first.purl)
    if product is not None:
        ev["product"] = product.key
        ev["paths"] = list(product.paths[:20])
        if product.sha256:
            ev["sha256"] = product.sha256
    return ev
