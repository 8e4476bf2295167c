"""Benchmark: how many of NVIDIA's distinct product version texts parse (goal >= 98 %).

Prints JSON figures over ../shared/fixtures/nvidia-psirt (or the directory given): the CSAF
slugs (CPE version fields of product_version / product_version_range branches) and the CVE
Record 5.x version texts, each counted once per distinct text; parsed share, the ones under
review (with the platform each was published for) and the unparsed list.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scanner.advisories.versions import nvidia_slug, parse_version_text

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "nvidia-psirt"


def _csaf_branches(branch: dict[str, Any], arch: str | None) -> Iterator[tuple[str, str | None]]:
    if branch.get("category") == "architecture":
        arch = branch.get("name")
    if branch.get("category") in ("product_version", "product_version_range"):
        product = branch.get("product") or {}
        cpe = (product.get("product_identification_helper") or {}).get("cpe")
        if isinstance(cpe, str) and cpe.count(":") >= 5:
            yield cpe.split(":")[5], arch
        elif branch.get("category") == "product_version_range":
            yield str(branch.get("name")), arch
    for child in branch.get("branches") or ():
        yield from _csaf_branches(child, arch)


def collect(root: Path) -> tuple[dict[str, set[str | None]], dict[str, set[str | None]]]:
    """Distinct (CSAF slug -> platforms) and (CVE Record text -> platforms)."""
    slugs: dict[str, set[str | None]] = {}
    texts: dict[str, set[str | None]] = {}
    for path in sorted(root.rglob("*.json")):
        doc = json.loads(path.read_bytes())
        if path.name.startswith("CVE-"):
            for aff in doc.get("containers", {}).get("cna", {}).get("affected", ()):
                plats = aff.get("platforms") or [None]
                for v in aff.get("versions", ()):
                    for key in ("version", "lessThan", "lessThanOrEqual"):
                        if isinstance(v.get(key), str):
                            texts.setdefault(v[key], set()).update(plats)
        else:
            for b in doc.get("product_tree", {}).get("branches", ()):
                for slug, arch in _csaf_branches(b, None):
                    slugs.setdefault(slug, set()).add(arch)
    return slugs, texts


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES
    if not root.is_dir():
        sys.exit(f"error: {root} is not a directory (the shared nvidia-psirt fixtures)")
    slugs, texts = collect(root)
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    unparsed: list[dict[str, Any]] = []
    review: list[dict[str, Any]] = []
    total = parsed = 0
    for name, group in (("csaf_slugs", slugs), ("cve_record_texts", texts)):
        ok = 0
        for text, platforms in sorted(group.items()):
            result = parse_version_text(text)
            ok += result.parsed
            if not result.parsed:
                unparsed.append({"source": name, "text": text, "reason": result.reason})
            for plat in sorted(p for p in platforms if p):
                scoped = parse_version_text(text, platform=plat)
                if scoped.parsed and scoped.review:
                    review.append({"text": text, "platform": plat, "review": scoped.review})
            if result.parsed and result.review and not any(platforms):
                review.append({"text": text, "platform": None, "review": result.review})
        figures[name] = {
            "distinct": len(group),
            "parsed": ok,
            "parsed_pct": round(100 * ok / len(group), 2),
        }
        total += len(group)
        parsed += ok
    # a CVE Record text and the CSAF slug made from it should read the same; where the slug
    # dropped a hyphen ("6.15.6-4" -> "6_15_64") they do not, and the importer must prefer
    # the CVE Record's text
    disagree = []
    for text in texts:
        slug = nvidia_slug(text)
        if slug in slugs:
            a, b = parse_version_text(text), parse_version_text(slug)
            if (
                a.parsed
                and b.parsed
                and [r.vers() for r in a.ranges] != [r.vers() for r in b.ranges]
            ):
                disagree.append({"text": text, "slug": slug})
    elapsed = time.perf_counter() - started
    figures.update(
        {
            "distinct_texts": total,
            "parsed": parsed,
            "parsed_pct": round(100 * parsed / total, 2),
            "under_review": len(review),
            "slug_and_text_disagree": disagree,
            "seconds": round(elapsed, 3),
            "unparsed": unparsed,
            "review": review,
        }
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
