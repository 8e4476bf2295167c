"""OSV JSON (the Open Source Vulnerability format) read into ``Advisory`` values.

For the packages NVIDIA's stacks are installed from: PyPI (the nvidia-* wheels, torch), Go (the
Container Toolkit modules) and Debian. Ranges become purl-spec ``vers:`` strings in the
ecosystem's scheme; a range the matcher cannot compare (``GIT`` commits) is kept for review.
"""

from __future__ import annotations

from typing import Any

from scanner.advisories.document import (
    DEFAULT_MAX_BYTES,
    Advisory,
    DocumentRefused,
    ProductStatus,
    Score,
    Vulnerability,
    load_json,
    schema_errors,
)
from scanner.advisories.ecosystems import SCHEMES

#: ecosystem (before any ":release" suffix) -> its purl-spec vers scheme: those the matcher
#: compares (scanner/advisories/ecosystems.py)
ECOSYSTEMS = SCHEMES


def read_osv(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Advisory:
    """An OSV document's ``Advisory`` (one vulnerability); ``DocumentRefused`` names why not."""
    return osv_from_json(load_json(data, max_bytes=max_bytes, what="an OSV document"))


def osv_from_json(doc: Any) -> Advisory:
    """``read_osv`` of a document already parsed from JSON."""
    if not isinstance(doc, dict) or "id" not in doc or "modified" not in doc:
        raise DocumentRefused("not_osv", "not an OSV document (no id and modified)")
    errors = schema_errors("osv", doc)
    if errors:
        raise DocumentRefused("not_osv", "not valid against the OSV schema: " + "; ".join(errors))
    statuses: list[ProductStatus] = []
    for i, aff in enumerate(doc.get("affected") or ()):
        package = aff.get("package") or {}
        ecosystem = str(package.get("ecosystem", ""))
        scheme = ECOSYSTEMS.get(ecosystem.split(":", 1)[0])
        if scheme is None:
            raise DocumentRefused(
                "not_osv",
                f"/affected/{i}/package/ecosystem {ecosystem!r} is not one this reader takes "
                f"({', '.join(ECOSYSTEMS)})",
            )
        name = str(package.get("name", ""))
        vers, unreadable = _vers(aff, scheme)
        parsed = None
        if not vers:
            parsed = {
                "parsed": False,
                "text": None,
                "reason": unreadable or "no range and no version listed",
                "review": None,
            }
        statuses.append(
            ProductStatus(
                product_id=package.get("purl") or f"{ecosystem}/{name}",
                status="known_affected",
                product=name,
                platform=ecosystem,
                parsed=parsed,
                vers=tuple(vers),
                purls=(package["purl"],) if package.get("purl") else (),
                score=_score(aff.get("severity") or doc.get("severity") or (), doc),
            )
        )
    aliases = tuple(str(a) for a in doc.get("aliases") or ())
    cves = [a for a in (doc["id"], *aliases) if a.startswith("CVE-")]
    vuln = Vulnerability(
        # one CVE among the aliases names the vulnerability (as the bulletins do); else the id
        id=cves[0] if len(cves) == 1 else doc["id"],
        aliases=tuple(a for a in (doc["id"], *aliases) if a != (cves[0] if len(cves) == 1 else "")),
        title=doc.get("summary"),
        description=doc.get("details"),
        published=doc.get("published"),
        cwe=next(iter((doc.get("database_specific") or {}).get("cwe_ids") or ()), None),
        scores=tuple(s.score for s in statuses if s.score is not None)[:1],
        statuses=() if doc.get("withdrawn") else tuple(statuses),
    )
    prefix = doc["id"].split("-", 1)[0]
    return Advisory(
        format="osv",
        publisher_namespace=f"osv:{prefix}",
        publisher_name=prefix,
        tracking_id=doc["id"],
        version=doc["modified"],
        status="final",
        title=doc.get("summary"),
        published=doc.get("published"),
        updated=doc["modified"],
        vulnerabilities=(vuln,),
    )


def _vers(aff: dict[str, Any], scheme: str) -> tuple[list[str], str | None]:
    """The ``vers:`` ranges of one affected package, and why a range could not be read."""
    out: list[str] = []
    why = None
    for r in aff.get("ranges") or ():
        if r.get("type") == "GIT":
            why = "GIT commit ranges are not versions"
            continue
        parts: list[str] = []
        for event in r.get("events") or ():
            for key, op in (
                ("introduced", ">="),
                ("fixed", "<"),
                ("last_affected", "<="),
                ("limit", "<"),
            ):
                if key in event:
                    value = str(event[key])
                    if key == "introduced" and value == "0":
                        continue
                    parts.append(f"{op}{value}")
        out.append(f"vers:{scheme}/" + ("|".join(parts) if parts else "*"))
    versions = [str(v) for v in aff.get("versions") or ()]
    if versions:
        out.append(f"vers:{scheme}/" + "|".join(versions))
    return out, why


def _score(severity: Any, doc: dict[str, Any]) -> Score | None:
    label = (doc.get("database_specific") or {}).get("severity")
    for s in severity:
        if isinstance(s, dict) and str(s.get("type", "")).startswith("CVSS"):
            # OSV gives the vector only; the base score is left to the publisher's label
            return Score(
                version=str(s["type"]).removeprefix("CVSS_V"),
                base_score=None,
                severity=str(label).upper() if label else None,
                vector=str(s.get("score")),
            )
    if label:
        return Score(version="", base_score=None, severity=str(label).upper(), vector=None)
    return None
