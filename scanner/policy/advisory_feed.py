"""The advisory feed read from files for ``gpuprov gate --advisories PATH`` (no database): the
documents of the paths as ``gpuprov advisories import`` reads them, matched here against one
BOM's products with the service's matcher (scanner/advisories/match.py), giving the
``advisories`` rule's input (``scanner.policy.facts.AdvisoryFacts``).

A document that cannot be read is an error, never skipped: a feed with a hole in it could hide
the very vulnerability the gate is asked about. A ``.sha256`` that does not match is kept and
named (NVIDIA publishes four such bulletins), as the import does by default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from msgspec import Struct

from scanner import vocabulary as V
from scanner.advisories.conditions import BadFact, facts_of, names_in
from scanner.advisories.document import DEFAULT_MAX_BYTES, Advisory, DocumentRefused
from scanner.advisories.feed import check_digest, complement, find_documents, read_document
from scanner.advisories.match import (
    TOOLKIT_FAMILIES,
    AssetFacts,
    Installed,
    StatusEntry,
    match,
    product_key,
    product_keys,
    status_entry,
)
from scanner.advisories.package_match import (
    InstalledPackage,
    entry_key,
    package_keys,
    package_of,
    product_packages,
)
from scanner.bom.foreign import (
    first,
    gpu_libraries,
    package_source,
    properties,
    sha256_of,
    walk,
)
from scanner.errors import ScannerError
from scanner.policy.facts import AdvisoryFacts, VulnerabilityFact

_SEVERITIES = ("LOW", "MEDIUM", "HIGH", "CRITICAL")


class FeedError(ScannerError):
    """An advisory path that cannot be used as a feed; the message names the file and why."""


class LocalFeed(Struct, frozen=True):
    """The vulnerabilities of the documents under some paths."""

    source: str
    documents: int
    #: the newest modification time of the files read (when the copy was last written)
    written_at: datetime | None
    #: CVE -> (its highest severity, every product status naming it)
    vulnerabilities: dict[str, tuple[str | None, tuple[StatusEntry, ...]]]
    digest_mismatches: tuple[str, ...] = ()


def _severity(values: Iterable[str | None]) -> str | None:
    ranked = [v.upper() for v in values if v and v.upper() in _SEVERITIES]
    return max(ranked, key=_SEVERITIES.index) if ranked else None


def _newest(advisories: Sequence[Advisory]) -> list[Advisory]:
    # one revision per (publisher, document): the latest by its update time, then version
    best: dict[tuple[str, str], Advisory] = {}
    for adv in advisories:
        key = (adv.publisher_namespace, adv.tracking_id)
        cur = best.get(key)
        if cur is None or (adv.updated or "", adv.version) > (cur.updated or "", cur.version):
            best[key] = adv
    return list(best.values())


def read_feed(paths: Sequence[Path], *, max_bytes: int = DEFAULT_MAX_BYTES) -> LocalFeed:
    """Every advisory document under ``paths`` (files or directories, NVIDIA's layout read as
    bulletins: a CSAF document completed by the CVE Records beside it); raises FeedError."""
    files = find_documents(paths)
    read: list[tuple[Path, Advisory]] = []
    mismatches: list[str] = []
    written: list[float] = []  # the files' modification times
    for path in files:
        try:
            with path.open("rb") as f:
                data = f.read(max_bytes + 1)
            written.append(path.stat().st_mtime)
        except OSError as e:
            raise FeedError(f"advisories: cannot read {path}: {e.strerror or e}") from None
        try:
            advisory = read_document(data, max_bytes=max_bytes)
        except DocumentRefused as e:
            raise FeedError(f"advisories: {path}: {e}") from None
        if check_digest(path, data) in ("mismatch", "unreadable"):
            mismatches.append(str(path))
        read.append((path, advisory))
    by_dir: dict[Path, list[Advisory]] = {}
    for path, adv in read:
        by_dir.setdefault(path.parent, []).append(adv)
    bulletins: list[Advisory] = []
    for group in by_dir.values():
        records = [a for a in group if a.format == "cve_record"]
        has_csaf = any(a.format == "csaf" for a in group)
        for adv in group:
            if adv.format == "csaf":
                bulletins.append(complement(adv, records))
            elif not (has_csaf and adv.format == "cve_record"):
                bulletins.append(adv)
    bulletins = _newest(bulletins)
    severities: dict[str, list[str | None]] = {}
    statuses: dict[str, list[StatusEntry]] = {}
    for adv in bulletins:
        for vuln in adv.vulnerabilities:
            severities.setdefault(vuln.id, []).extend(s.severity for s in vuln.scores)
            for s in vuln.statuses:
                severities[vuln.id].append(s.score.severity if s.score else None)
                statuses.setdefault(vuln.id, []).append(status_entry(s, adv.format))
    return LocalFeed(
        source=", ".join(str(p) for p in paths),
        documents=len(bulletins),
        written_at=datetime.fromtimestamp(max(written), UTC) if written else None,
        vulnerabilities={
            cve: (_severity(severities.get(cve, ())), tuple(statuses.get(cve, ())))
            for cve in sorted(set(severities) | set(statuses))
        },
        digest_mismatches=tuple(mismatches),
    )


def products_of_bom(
    doc: Mapping[str, Any], families: Iterable[str], *, host: bool = False
) -> AssetFacts:
    """The matcher's inputs of a CycloneDX BOM: its product components (``gpuprov:product:key``),
    the CUDA Toolkit library families it holds, the packages the service keeps of it (GPU
    packages and the owners of GPU files) and, for a host's BOM only, its condition facts
    (``gpuprov:condition:*``), as the service's ingest reads them. Raises FeedError for a
    condition fact not of its form, or on an image's BOM (an image is no node)."""
    products = []
    for component, _ in walk(doc.get("components")):
        props = properties(component)
        key = first(props, V.PRODUCT_KEY)
        if key is None:
            continue
        version = component.get("version")
        products.append(
            Installed(
                key=key,
                version=version if isinstance(version, str) and version else None,
                toolkit=first(props, V.PRODUCT_TOOLKIT),
                line=first(props, V.PRODUCT_LINE),
                branch=first(props, V.DRIVER_BRANCH),
                paths=tuple(props.get(V.PRODUCT_PATH, ())[:64]),
                sha256=sha256_of(component),
                owner=first(props, V.OWNER_PURL),
            )
        )
    libraries = {(f, None) for f in families if f in TOOLKIT_FAMILIES}
    metadata = doc.get("metadata")
    asset = metadata.get("component") if isinstance(metadata, dict) else None
    asset_props = properties(asset) if isinstance(asset, dict) else {}
    claimed = names_in(asset_props)
    if claimed and not host:
        raise FeedError(
            f"the BOM's asset is no host but claims host conditions ({', '.join(claimed[:3])})"
        )
    try:
        facts = {name: value for name, (value, _) in facts_of(asset_props).items()}
    except BadFact as e:
        raise FeedError(f"the BOM's condition fact {e}") from None
    packages: set[InstalledPackage] = set()
    for listed in gpu_libraries(doc).packages:
        purl, version = listed.component.get("purl"), listed.component.get("version")
        name, source_version = package_source(listed.props)
        found = package_of(
            str(purl),
            version if isinstance(version, str) else None,
            source_name=name,
            source_version=source_version,
        )
        if found is not None:
            packages.add(found)
    return AssetFacts(
        products=tuple(sorted(products, key=repr)),
        libraries=tuple(sorted(libraries, key=repr)),
        facts=facts,
        packages=tuple(sorted(packages, key=repr)),
    )


def advisory_facts(asset: AssetFacts, feed: LocalFeed) -> AdvisoryFacts:
    """The ``advisories`` rule's input: every finding of the feed on this asset (no analysis:
    analyses live in the service)."""
    # the product keys whose statements may concern the asset (as the service reads them)
    keys = product_keys(asset)
    held = package_keys([*asset.packages, *product_packages(asset.products)])
    found: list[VulnerabilityFact] = []
    for cve, (severity, entries) in feed.vulnerabilities.items():
        named = {product_key(e.product) for e in entries if e.ecosystem is None}
        packages = {k[:2] for e in entries if (k := entry_key(e)) is not None}
        if not named & keys and not packages & held:
            continue  # names nothing the asset holds: the matcher would answer nothing
        for f in match(cve, entries, asset):
            found.append(
                VulnerabilityFact(
                    cve=f.cve,
                    status=f.status,
                    severity=severity,
                    product=f.product,
                    component=f.component,
                    installed=f.installed,
                    fix_available=f.fixed_in is not None,
                    review=f.review,
                )
            )
    mismatched = f"; {len(feed.digest_mismatches)} not matching their .sha256" * bool(
        feed.digest_mismatches
    )
    return AdvisoryFacts(
        feed_at=feed.written_at,
        documents=feed.documents,
        source=f"files {feed.source}{mismatched}",
        findings=tuple(found),
    )
