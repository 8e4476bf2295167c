"""A feed on disk: which files of a path are advisory documents, their ``.sha256`` checks, and
one reader for any document (CSAF 2.0, OSV, CVE Record 5.x, told apart by their own fields).

NVIDIA's repository is laid out ``YEAR/<bulletin>/`` with the CSAF document, one CVE Record per
CVE and a ``.sha256`` beside every file. The digest files give integrity against a damaged copy,
not authenticity: whoever can change a document can change its digest file too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from msgspec.structs import replace

from scanner.advisories.csaf import csaf_from_json
from scanner.advisories.cve_record import cve_record_from_json
from scanner.advisories.document import (
    DEFAULT_MAX_BYTES,
    Advisory,
    DocumentRefused,
    Format,
    load_json,
)
from scanner.advisories.osv import osv_from_json
from scanner.advisories.versions import nvidia_slug, parse_version_text

Digest = Literal["match", "mismatch", "absent", "unreadable"]
_HEX = re.compile(r"[0-9a-fA-F]{64}")


def sniff(doc: Any) -> Format:
    """Which format a parsed document claims to be, by its own top-level fields."""
    if isinstance(doc, dict):
        if isinstance(doc.get("document"), dict) and "csaf_version" in doc["document"]:
            return "csaf"
        if doc.get("dataType") == "CVE_RECORD":
            return "cve_record"
        if "id" in doc and "modified" in doc:
            return "osv"
    raise DocumentRefused(
        "unknown_format", "neither CSAF 2.0, OSV nor a CVE record (by its top-level fields)"
    )


def read_document(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Advisory:
    """Any supported document's ``Advisory``; ``DocumentRefused`` names why it is not one."""
    doc = load_json(data, max_bytes=max_bytes, what="an advisory document")
    kind = sniff(doc)
    if kind == "csaf":
        return csaf_from_json(doc)
    if kind == "osv":
        return osv_from_json(doc)
    return cve_record_from_json(doc)


def find_documents(paths: Iterable[Path]) -> list[Path]:
    """The ``*.json`` files of ``paths`` (a directory recursively, in name order); a named file
    is taken whatever its suffix. Missing paths are returned as given (their read fails)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*.json") if p.is_file()))
        else:
            out.append(path)
    return out


def check_digest(path: Path, data: bytes) -> Digest:
    """``data`` against the ``<path>.sha256`` beside it (a hex SHA-256, optionally followed by
    a file name as sha256sum writes it)."""
    side = path.with_name(path.name + ".sha256")
    try:
        text = side.read_text(encoding="ascii", errors="replace")[:1024]
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "unreadable"
    first = text.split()[0] if text.split() else ""
    if not _HEX.fullmatch(first):
        return "unreadable"
    return "match" if first.lower() == hashlib.sha256(data).hexdigest() else "mismatch"


def complement(bulletin: Advisory, records: Iterable[Advisory]) -> Advisory:
    """A CSAF bulletin whose version texts survive only as CPE slugs, with the original text and
    platform of the CVE Records published beside it (matched by CVE and slug)."""
    texts: dict[tuple[str, str], tuple[str, str | None]] = {}
    for record in records:
        for vuln in record.vulnerabilities:
            for s in vuln.statuses:
                if s.version_text:
                    texts.setdefault(
                        (vuln.id, nvidia_slug(s.version_text)), (s.version_text, s.platform)
                    )
    if not texts:
        return bulletin
    vulns = []
    for vuln in bulletin.vulnerabilities:
        statuses = []
        for s in vuln.statuses:
            if s.parsed is not None and s.parsed.get("form") == "slug" and s.version_text:
                found = _by_slug(texts, vuln.id, s.version_text)
                if found is not None:
                    text, platform = found
                    platform = s.platform or platform
                    parsed = parse_version_text(text, platform=platform).as_dict()
                    s = replace(s, version_text=text, platform=platform, parsed=parsed)
            statuses.append(s)
        vulns.append(replace(vuln, statuses=tuple(statuses)))
    return replace(bulletin, vulnerabilities=tuple(vulns))


def _by_slug(
    texts: dict[tuple[str, str], tuple[str, str | None]], cve: str, slug: str
) -> tuple[str, str | None] | None:
    # a product id carries the platform before the text's slug: the longest text that ends it
    best = None
    for (c, text_slug), found in texts.items():
        if c == cve and text_slug and slug.lstrip("_").endswith(text_slug):
            if best is None or len(text_slug) > best[0]:
                best = (len(text_slug), found)
    return best[1] if best else None
