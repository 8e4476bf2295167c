"""CSAF 2.0 security advisories (OASIS CSAF v2.0, errata 01) read into ``Advisory`` values.

The whole document is read, not only what NVIDIA uses today: every ``product_status`` list,
``product_tree`` branches (``architecture`` as the platform, ``product_version_range`` with
``vers:``), ``full_product_names`` and ``relationships``, each product's identification helper
(CPE, purl, file hashes), flags, remediations and per-product scores. A document must pass the
schema and the mandatory tests 6.1.1 (missing definition of product id), 6.1.2 (multiple
definition of product id) and 6.1.6 (contradicting product status); else it is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from msgspec import Struct

from scanner.advisories.document import (
    CSAF_STATUSES,
    DEFAULT_MAX_BYTES,
    Advisory,
    DocumentRefused,
    ProductStatus,
    Score,
    Vulnerability,
    load_json,
    schema_errors,
)
from scanner.advisories.versions import fix_gap, merge_reviews, nvidia_slug, parse_version_text

#: CSAF 6.1.6: a product may be in at most one of these groups per vulnerability
_CONTRADICTING = {
    "first_affected": "affected",
    "known_affected": "affected",
    "last_affected": "affected",
    "known_not_affected": "not_affected",
    "first_fixed": "fixed",
    "fixed": "fixed",
    "under_investigation": "under_investigation",
}
_AFFECTED = ("first_affected", "known_affected", "last_affected")
_FIXED = ("first_fixed", "fixed")


class Product(Struct, frozen=True, kw_only=True):
    """A product of the product tree with what its branches say about it."""

    product_id: str
    name: str
    #: the product line ("GeForce", "CUDA Toolkit"): the nearest product_name branch
    line: str
    version_text: str | None = None
    vers: str | None = None
    platform: str | None = None
    cpe: str | None = None
    purls: tuple[str, ...] = ()
    hashes: tuple[tuple[str, str, str], ...] = ()


def read_csaf(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Advisory:
    """A CSAF 2.0 document's ``Advisory``; ``DocumentRefused`` names why one is not imported."""
    return csaf_from_json(load_json(data, max_bytes=max_bytes, what="a CSAF document"))


def csaf_from_json(doc: Any) -> Advisory:
    """``read_csaf`` of a document already parsed from JSON."""
    if not isinstance(doc, dict) or not isinstance(doc.get("document"), dict):
        raise DocumentRefused("not_csaf", "not a CSAF document (no /document object)")
    version = doc["document"].get("csaf_version")
    if version != "2.0":
        raise DocumentRefused("not_csaf", f"csaf_version {version!r} is not 2.0")
    errors = schema_errors("csaf", doc)
    if errors:
        raise DocumentRefused(
            "not_csaf", "not valid against the CSAF 2.0 schema: " + "; ".join(errors)
        )
    products = _products(doc)
    _mandatory_tests(doc, products)
    return _advisory(doc, products)


# -- product tree -----------------------------------------------------------------------------


def _helper(product: dict[str, Any]) -> dict[str, Any]:
    pih = product.get("product_identification_helper") or {}
    hashes = tuple(
        (h.get("algorithm", ""), h.get("value", ""), fh.get("filename", ""))
        for fh in pih.get("hashes") or ()
        for h in fh.get("file_hashes") or ()
    )
    # CSAF 2.0 has one purl; 2.1 a list: both read the same
    purls = pih.get("purls") or ([pih["purl"]] if pih.get("purl") else [])
    cpe = pih.get("cpe")
    return {"cpe": cpe, "purls": tuple(purls), "hashes": hashes}


def _walk(
    branch: dict[str, Any], line: str | None, platform: str | None
) -> Iterator[tuple[dict[str, Any], dict[str, Any], str | None, str | None]]:
    category = branch.get("category")
    name = branch.get("name", "")
    if category == "architecture":
        platform = name
    elif category == "product_name":
        line = name
    product = branch.get("product")
    if product is not None:
        yield branch, product, line, platform
    for child in branch.get("branches") or ():
        yield from _walk(child, line, platform)


def _version_of(branch: dict[str, Any], product: dict[str, Any]) -> tuple[str | None, str | None]:
    """(version text, vers range) of a leaf branch."""
    category, name = branch.get("category"), str(branch.get("name", ""))
    pname = str(product.get("name", ""))
    pid = str(product.get("product_id", ""))
    if category == "product_version_range":
        if name.startswith("vers:"):
            return None, name
        return name, None
    if category != "product_version":
        return None, None
    # the spec puts the version in the branch name; NVIDIA puts the product line there and the
    # version text, as written, in the product's name (its slug ends the product id)
    slug = nvidia_slug(pname)
    if pname and slug and pid.endswith(slug) and nvidia_slug(name) != slug:
        return pname, None
    return name, None


def _products(doc: dict[str, Any]) -> dict[str, list[Product]]:
    """Every product definition by id (a list: 6.1.2 refuses an id defined twice)."""
    tree = doc.get("product_tree") or {}
    found: dict[str, list[Product]] = {}

    def add(p: Product) -> None:
        found.setdefault(p.product_id, []).append(p)

    for top in tree.get("branches") or ():
        for branch, product, line, platform in _walk(top, None, None):
            text, vers = _version_of(branch, product)
            is_version = branch.get("category") in ("product_version", "product_version_range")
            add(
                Product(
                    product_id=product["product_id"],
                    name=product["name"],
                    line=(branch["name"] if is_version and text == product["name"] else line)
                    or product["name"],
                    version_text=text,
                    vers=vers,
                    platform=platform,
                    **_helper(product),
                )
            )
    for product in tree.get("full_product_names") or ():
        add(
            Product(
                product_id=product["product_id"],
                name=product["name"],
                line=product["name"],
                **_helper(product),
            )
        )
    for rel in tree.get("relationships") or ():
        fpn = rel["full_product_name"]
        refs = found.get(rel["product_reference"])
        ref = refs[0] if refs else None
        add(
            Product(
                product_id=fpn["product_id"],
                name=fpn["name"],
                line=ref.line if ref else fpn["name"],
                version_text=ref.version_text if ref else None,
                vers=ref.vers if ref else None,
                platform=ref.platform if ref else None,
                **_helper(fpn),
            )
        )
    return found


# -- mandatory tests (CSAF 2.0 §6.1) ----------------------------------------------------------


def _references(doc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(JSON pointer, product id) of every product reference of the document (§6.1.1)."""
    tree = doc.get("product_tree") or {}
    for i, group in enumerate(tree.get("product_groups") or ()):
        for j, pid in enumerate(group.get("product_ids") or ()):
            yield f"/product_tree/product_groups/{i}/product_ids/{j}", pid
    for i, rel in enumerate(tree.get("relationships") or ()):
        for key in ("product_reference", "relates_to_product_reference"):
            yield f"/product_tree/relationships/{i}/{key}", rel[key]
    for i, vuln in enumerate(doc.get("vulnerabilities") or ()):
        base = f"/vulnerabilities/{i}"
        for status, ids in (vuln.get("product_status") or {}).items():
            for j, pid in enumerate(ids):
                yield f"{base}/product_status/{status}/{j}", pid
        for key in ("flags", "remediations", "threats"):
            for k, item in enumerate(vuln.get(key) or ()):
                for j, pid in enumerate(item.get("product_ids") or ()):
                    yield f"{base}/{key}/{k}/product_ids/{j}", pid
        for k, score in enumerate(vuln.get("scores") or ()):
            for j, pid in enumerate(score.get("products") or ()):
                yield f"{base}/scores/{k}/products/{j}", pid


def _mandatory_tests(doc: dict[str, Any], products: dict[str, list[Product]]) -> None:
    twice = sorted(pid for pid, defs in products.items() if len(defs) > 1)
    if twice:
        raise DocumentRefused(
            "invalid", f"CSAF 6.1.2 multiple definition of product id: {', '.join(twice[:5])}"
        )
    for pointer, pid in _references(doc):
        if pid not in products:
            raise DocumentRefused(
                "invalid", f"CSAF 6.1.1 missing definition of product id {pid!r} at {pointer}"
            )
    for i, vuln in enumerate(doc.get("vulnerabilities") or ()):
        seen: dict[str, str] = {}
        for status, ids in (vuln.get("product_status") or {}).items():
            group = _CONTRADICTING.get(status)
            if group is None:
                continue
            for pid in ids:
                other = seen.setdefault(pid, group)
                if other != group:
                    raise DocumentRefused(
                        "invalid",
                        f"CSAF 6.1.6 contradicting product status: {pid!r} is both {other} "
                        f"and {group} in /vulnerabilities/{i}",
                    )


# -- vulnerabilities --------------------------------------------------------------------------


def _score(entry: dict[str, Any]) -> Score | None:
    for key in ("cvss_v3", "cvss_v2"):
        cvss = entry.get(key)
        if isinstance(cvss, dict) and isinstance(cvss.get("baseScore"), int | float):
            return Score(
                version=str(cvss.get("version", key[-2:])),
                base_score=float(cvss["baseScore"]),
                severity=(cvss.get("baseSeverity") or _v2_severity(cvss["baseScore"])),
                vector=cvss.get("vectorString"),
            )
    return None


def _v2_severity(score: float) -> str:
    # CVSS v2 has no severity field; NVD's v2 bands
    return "HIGH" if score >= 7 else ("MEDIUM" if score >= 4 else "LOW")


def _groups(doc: dict[str, Any]) -> dict[str, list[str]]:
    tree = doc.get("product_tree") or {}
    return {g["group_id"]: list(g["product_ids"]) for g in tree.get("product_groups") or ()}


def _ids(item: dict[str, Any], groups: dict[str, list[str]]) -> list[str]:
    ids = list(item.get("product_ids") or ())
    for gid in item.get("group_ids") or ():
        ids.extend(groups.get(gid, ()))
    return ids


def _vulnerability(
    vuln: dict[str, Any], index: int, products: dict[str, Product], groups: dict[str, list[str]]
) -> Vulnerability:
    scores: dict[str, Score] = {}
    all_scores = []
    for entry in vuln.get("scores") or ():
        score = _score(entry)
        if score is None:
            continue
        all_scores.append(score)
        for pid in entry.get("products") or ():
            # the highest of several scores of one product
            if pid not in scores or (score.base_score or 0) > (scores[pid].base_score or 0):
                scores[pid] = score
    justification: dict[str, str] = {}
    for flag in vuln.get("flags") or ():
        for pid in _ids(flag, groups):
            justification[pid] = flag["label"]
    remediations: dict[str, list[dict[str, Any]]] = {}
    for rem in vuln.get("remediations") or ():
        entry = {k: rem.get(k) for k in ("category", "details", "url", "date")}
        for pid in _ids(rem, groups):
            remediations.setdefault(pid, []).append(entry)
    statuses = []
    pstatus = vuln.get("product_status") or {}
    for status in CSAF_STATUSES:
        for pid in pstatus.get(status) or ():
            p = products[pid]
            parsed_text = None
            if p.version_text is not None:
                parsed_text = parse_version_text(p.version_text, platform=p.platform)
            statuses.append((status, p, parsed_text))
    # the vendor's gaps between an affected range and its fix (12.4 GA in neither) go to review
    by_scope: dict[tuple[str, str | None], dict[str, list[int]]] = {}
    for n, (status, p, pv) in enumerate(statuses):
        kind = "affected" if status in _AFFECTED else ("fixed" if status in _FIXED else None)
        if kind and pv is not None:
            by_scope.setdefault((p.line, p.platform), {}).setdefault(kind, []).append(n)
    fixed_up = {}
    for group in by_scope.values():
        aff, fix = group.get("affected", []), group.get("fixed", [])
        if len(aff) == 1 and len(fix) == 1:
            a, f = statuses[aff[0]][2], statuses[fix[0]][2]
            assert a is not None and f is not None
            fixed_up[aff[0]] = merge_reviews(a, fix_gap(a, f))
    out = []
    for n, (status, p, pv) in enumerate(statuses):
        pv = fixed_up.get(n, pv)
        out.append(
            ProductStatus(
                product_id=p.product_id,
                status=status,
                product=p.line.strip(),
                version_text=p.version_text,
                platform=p.platform,
                parsed=pv.as_dict() if pv is not None else None,
                vers=(p.vers,) if p.vers else (),
                cpe=p.cpe,
                purls=p.purls,
                hashes=p.hashes,
                justification=justification.get(p.product_id),
                remediations=tuple(remediations.get(p.product_id, ())),
                score=scores.get(p.product_id),
            )
        )
    notes = tuple(
        {"category": n.get("category", ""), "title": n.get("title", ""), "text": n.get("text", "")}
        for n in vuln.get("notes") or ()
    )
    description = next(
        (n["text"] for n in notes if n["category"] in ("description", "summary")), None
    )
    ident = vuln.get("cve") or next(
        (i.get("text") for i in vuln.get("ids") or () if i.get("text")), None
    )
    cwe = vuln.get("cwe") or {}
    return Vulnerability(
        id=ident or f"vulnerability-{index}",
        title=vuln.get("title"),
        description=description,
        published=vuln.get("release_date") or vuln.get("discovery_date"),
        cwe=cwe.get("id"),
        scores=tuple(all_scores),
        statuses=tuple(out),
        notes=notes,
    )


def _advisory(doc: dict[str, Any], products: dict[str, list[Product]]) -> Advisory:
    meta = doc["document"]
    tracking = meta["tracking"]
    publisher = meta["publisher"]
    single = {pid: defs[0] for pid, defs in products.items()}
    groups = _groups(doc)
    vulns = tuple(
        _vulnerability(v, i, single, groups) for i, v in enumerate(doc.get("vulnerabilities") or ())
    )
    return Advisory(
        format="csaf",
        publisher_namespace=publisher["namespace"],
        publisher_name=publisher["name"],
        tracking_id=tracking["id"],
        version=tracking["version"],
        status=tracking["status"],
        title=meta.get("title"),
        published=tracking.get("initial_release_date"),
        updated=tracking.get("current_release_date"),
        vulnerabilities=vulns,
    )
