"""Advisories matched offline: a feed read from local files (as ``gpuprov advisories import``
reads them, with no database) and one scan's products matched against it with match.py, for
``gpuprov scan --vex-out``.

A document that cannot be read refuses the whole feed (``LocalFeedError``): a VEX document
built from part of a feed would state "not affected" by omission.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scanner.advisories.document import DEFAULT_MAX_BYTES, Advisory, DocumentRefused
from scanner.advisories.feed import check_digest, complement, find_documents, read_document
from scanner.advisories.match import (
    TOOLKIT_FAMILIES,
    AssetFacts,
    Finding,
    Installed,
    StatusEntry,
    match,
    status_entry,
)
from scanner.advisories.package_match import InstalledPackage, package_of
from scanner.advisories.vex_out import VexSubject, VulnInfo
from scanner.model import AssetKind, ScanResult


class LocalFeedError(Exception):
    """The local feed cannot be used: names the file and why."""


@dataclass
class LocalFeed:
    """The documents of a local feed (CSAF completed by the CVE Records beside it)."""

    advisories: list[Advisory] = field(default_factory=list)
    #: files whose ``.sha256`` does not match (read anyway, as import does by default)
    digest_mismatches: list[str] = field(default_factory=list)


def load_feed(paths: Iterable[Path], *, max_bytes: int = DEFAULT_MAX_BYTES) -> LocalFeed:
    """Every advisory document under ``paths``; ``LocalFeedError`` for a file that is missing,
    unreadable or refused, or when there is no document at all."""
    feed = LocalFeed()
    by_dir: dict[Path, list[Advisory]] = {}
    for path in find_documents(paths):
        try:
            with path.open("rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise LocalFeedError(f"{path}: unreadable: {e.strerror or e}") from None
        if check_digest(path, data) in ("mismatch", "unreadable"):
            feed.digest_mismatches.append(str(path))
        try:
            adv = read_document(data, max_bytes=max_bytes)
        except DocumentRefused as e:
            raise LocalFeedError(f"{path}: {e}") from None
        by_dir.setdefault(path.parent, []).append(adv)
    for group in by_dir.values():
        records = [a for a in group if a.format == "cve_record"]
        has_csaf = any(a.format == "csaf" for a in group)
        for adv in group:
            if adv.format == "csaf":
                feed.advisories.append(complement(adv, records))
            elif not (has_csaf and adv.format == "cve_record"):
                feed.advisories.append(adv)
    if not feed.advisories:
        raise LocalFeedError(
            "no advisory document under " + ", ".join(str(p) for p in paths) or "(nothing)"
        )
    return feed


def asset_facts(result: ScanResult) -> AssetFacts:
    """The matcher's inputs of a scan: its products, the CUDA Toolkit library families it holds,
    its packages and a host's condition facts (as the service keeps them for a pushed report)."""
    products = [
        Installed(
            key=p.key,
            version=p.version,
            toolkit=p.toolkit,
            line=p.line,
            branch=p.branch,
            paths=tuple(p.paths),
            sha256=p.sha256,
            owner=p.owner,
        )
        for p in result.products
    ]
    families = {
        (lib.ident.family, None) for lib in result.libraries if lib.ident.family in TOOLKIT_FAMILIES
    }
    packages: set[InstalledPackage] = set()
    for pkg in result.packages:
        source = pkg.built_from
        found = package_of(
            pkg.purl,
            pkg.version,
            source_name=source[0] if source else None,
            source_version=source[1] if source else None,
        )
        if found is not None:
            packages.add(found)
    # a host's own condition facts (its node scan); an image is no node and has none
    node = result.node if result.asset.kind is AssetKind.HOST else None
    facts = {c.name: c.value for c in node.conditions} if node is not None else {}
    return AssetFacts(
        products=tuple(sorted(products, key=repr)),
        libraries=tuple(sorted(families, key=repr)),
        facts=facts,
        packages=tuple(sorted(packages, key=repr)),
    )


def match_feed(feed: LocalFeed, facts: AssetFacts) -> list[Finding]:
    """Every finding of the feed's vulnerabilities on an asset of these facts."""
    entries: dict[str, list[StatusEntry]] = {}
    for adv in feed.advisories:
        for vuln in adv.vulnerabilities:
            for s in vuln.statuses:
                entries.setdefault(vuln.id, []).append(status_entry(s, adv.format))
    out: list[Finding] = []
    for cve in sorted(entries):
        out += match(cve, entries[cve], facts)
    return out


def vuln_info(feed: LocalFeed, cves: Sequence[str]) -> dict[str, VulnInfo]:
    """Per CVE: its title, newest bulletin, publisher and top score, from the feed."""
    wanted = set(cves)
    out: dict[str, tuple[tuple[float, str], VulnInfo]] = {}
    for adv in feed.advisories:
        for vuln in adv.vulnerabilities:
            if vuln.id not in wanted:
                continue
            scores = [s for s in vuln.scores if s.base_score is not None]
            top = max(scores, key=lambda s: s.base_score or 0.0, default=None)
            rank = (
                top.base_score if top and top.base_score is not None else -1.0,
                adv.updated or adv.published or "",
            )
            info = VulnInfo(
                title=vuln.title or adv.title,
                bulletin=adv.tracking_id,
                publisher=adv.publisher_name,
                severity=top.severity if top else None,
                cvss=top.base_score if top else None,
            )
            if vuln.id not in out or rank > out[vuln.id][0]:
                out[vuln.id] = (rank, info)
    return {k: v for k, (_, v) in out.items()}


def newest_date(feed: LocalFeed) -> str | None:
    """The newest release date among the feed's documents (the time its facts were known)."""
    dates = [a.updated or a.published for a in feed.advisories]
    return max((d for d in dates if d), default=None)


def subject_of(result: ScanResult) -> VexSubject:
    """The scanned asset as a VEX subject."""
    a = result.asset
    if a.kind is AssetKind.IMAGE or a.digest:
        from scanner.imageref import oci_purl

        purl = str(oci_purl(a.name, a.digest, a.platform).to_string()) if a.digest else None
        sha = a.digest.split(":", 1)[1] if a.digest and a.digest.startswith("sha256:") else None
        return VexSubject(kind="image", name=a.name, purl=purl, sha256=sha)
    return VexSubject(kind="host", name=a.name, machine_id=a.machine_id)
