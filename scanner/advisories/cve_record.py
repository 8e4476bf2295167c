"""CVE Record Format 5.x files read into ``Advisory`` values.

NVIDIA publishes one beside each CVE of a bulletin; they keep the version text as NVIDIA wrote
it ("All driver versions prior to 535.274.02") and the platform ("Linux(R535)"), which go to
``parse_version_text`` together. The record's shape is checked field by field (the CVE JSON 5
schema is a bundle of remote references no kept Python package ships).
"""

from __future__ import annotations

import re
from typing import Any

from scanner.advisories.document import (
    DEFAULT_MAX_BYTES,
    Advisory,
    DocumentRefused,
    ProductStatus,
    Score,
    Vulnerability,
    load_json,
)
from scanner.advisories.versions import parse_version_text

_CVE_ID = re.compile(r"CVE-\d{4}-\d{4,19}")
#: CVE 5 version statuses -> the CSAF product_status list they correspond to
_STATUS = {"affected": "known_affected", "unaffected": "fixed", "unknown": "under_investigation"}
_METRICS = ("cvssV4_0", "cvssV3_1", "cvssV3_0", "cvssV2_0")


def _refuse(message: str) -> DocumentRefused:
    return DocumentRefused("not_cve_record", message)


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _refuse(f"{where} is not a string")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _refuse(f"{where} is not a list")
    return value


def _dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _refuse(f"{where} is not an object")
    return value


def read_cve_record(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Advisory:
    """A CVE Record 5.x file's ``Advisory`` (one vulnerability); ``DocumentRefused`` if not."""
    return cve_record_from_json(load_json(data, max_bytes=max_bytes, what="a CVE record"))


def cve_record_from_json(doc: Any) -> Advisory:
    """``read_cve_record`` of a record already parsed from JSON."""
    if not isinstance(doc, dict) or doc.get("dataType") != "CVE_RECORD":
        raise _refuse("not a CVE record (dataType is not CVE_RECORD)")
    version = str(doc.get("dataVersion", ""))
    if not re.fullmatch(r"5\.\d+(?:\.\d+)?", version):
        raise _refuse(f"dataVersion {version!r} is not 5.x")
    meta = _dict(doc.get("cveMetadata"), "/cveMetadata")
    cve = _str(meta.get("cveId"), "/cveMetadata/cveId")
    if not _CVE_ID.fullmatch(cve):
        raise _refuse(f"/cveMetadata/cveId {cve!r} is not a CVE id")
    cna = _dict(_dict(doc.get("containers"), "/containers").get("cna"), "/containers/cna")
    statuses: list[ProductStatus] = []
    score = _score(_list(cna.get("metrics"), "/containers/cna/metrics"))
    for i, aff in enumerate(_list(cna.get("affected"), "/containers/cna/affected")):
        where = f"/containers/cna/affected/{i}"
        aff = _dict(aff, where)
        product = str(aff.get("product") or aff.get("packageName") or "")
        platforms: list[str | None] = [
            str(p) for p in _list(aff.get("platforms"), f"{where}/platforms")
        ] or [None]
        for j, v in enumerate(_list(aff.get("versions"), f"{where}/versions")):
            v = _dict(v, f"{where}/versions/{j}")
            status = _STATUS.get(_str(v.get("status"), f"{where}/versions/{j}/status"))
            if status is None:
                raise _refuse(f"{where}/versions/{j}/status {v.get('status')!r} is unknown")
            text, bound = _text(v, f"{where}/versions/{j}")
            for platform in platforms:
                parsed = parse_version_text(text, platform=platform)
                statuses.append(
                    ProductStatus(
                        product_id=f"{product}|{platform or ''}|{text}",
                        status=status,
                        product=product,
                        version_text=text,
                        platform=platform,
                        parsed={**parsed.as_dict(), "bound": bound},
                        cpe=next(iter(_list(aff.get("cpes"), f"{where}/cpes")), None),
                        score=score,
                    )
                )
    titles = [
        d.get("value")
        for d in _list(cna.get("descriptions"), "descriptions")
        if isinstance(d, dict)
    ]
    problem = [
        d.get("cweId")
        for p in _list(cna.get("problemTypes"), "problemTypes")
        if isinstance(p, dict)
        for d in _list(p.get("descriptions"), "problemTypes descriptions")
        if isinstance(d, dict) and d.get("cweId")
    ]
    vuln = Vulnerability(
        id=cve,
        title=cna.get("title") if isinstance(cna.get("title"), str) else None,
        description=next((t for t in titles if isinstance(t, str)), None),
        published=meta.get("datePublished"),
        cwe=problem[0] if problem else None,
        scores=(score,) if score else (),
        statuses=tuple(statuses),
    )
    assigner = str(meta.get("assignerShortName") or "unknown")
    return Advisory(
        format="cve_record",
        publisher_namespace=f"https://www.cve.org/cna/{assigner}",
        publisher_name=assigner,
        tracking_id=cve,
        # a record's revisions: its dateUpdated, else its serial
        version=str(meta.get("dateUpdated") or meta.get("serial") or "1"),
        status="final" if meta.get("state") == "PUBLISHED" else "draft",
        title=vuln.title,
        published=meta.get("datePublished"),
        updated=meta.get("dateUpdated"),
        vulnerabilities=(vuln,),
    )


def _text(v: dict[str, Any], where: str) -> tuple[str, str]:
    """The version text of a CVE 5 version entry and which field it came from: NVIDIA writes
    the whole range as text in ``version``; other CNAs use ``lessThan``."""
    for key in ("lessThan", "lessThanOrEqual"):
        if isinstance(v.get(key), str):
            rel = "prior to" if key == "lessThan" else "up to and including"
            base = v.get("version")
            lower = f"{base} " if isinstance(base, str) and base not in ("0", "*") else ""
            if lower:
                return f"{lower.strip()} through {rel} {v[key]}", key
            return f"All versions {rel} {v[key]}", key
    return _str(v.get("version"), f"{where}/version"), "version"


def _score(metrics: list[Any]) -> Score | None:
    for m in metrics:
        if not isinstance(m, dict):
            continue
        for key in _METRICS:
            cvss = m.get(key)
            if isinstance(cvss, dict) and isinstance(cvss.get("baseScore"), int | float):
                return Score(
                    version=str(cvss.get("version", "")),
                    base_score=float(cvss["baseScore"]),
                    severity=cvss.get("baseSeverity"),
                    vector=cvss.get("vectorString"),
                )
    return None
