"""What the dashboard's pages show beyond the API's answers: an asset's compliance grouped per
framework, and the overview's fleet figures (aggregated in SQL, a few statements per page)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.domain import advisories, vulnerabilities
from app.storage.repositories import overview as repo
from app.storage.repositories.scopes import AssetScope
from scanner.policy.controls import default_catalog


def compliance_by_framework(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`compliance.asset_compliance` entries with their controls grouped per framework (in the
    catalog's order), each control with its official title and status."""
    catalog = default_catalog()
    out = []
    for entry in entries:
        frameworks = []
        for framework in catalog.frameworks:
            controls = [
                {"id": cid, "title": catalog.controls[cid].title, "status": status}
                for cid, status in sorted(entry["controls"].items())
                if cid in catalog.controls and catalog.controls[cid].framework == framework.id
            ]
            if controls:
                counts = {
                    s: sum(c["status"] == s for c in controls)
                    for s in ("pass", "fail", "not_applicable")
                }
                frameworks.append(
                    {"id": framework.id, "title": framework.title, "controls": controls, **counts}
                )
        out.append({**entry, "frameworks": frameworks})
    return out


#: the families whose versions the overview charts
CHARTED_FAMILIES = (("cudnn", "cuDNN"), ("cudart", "CUDA runtime"))
#: bars per chart: the most used versions
CHART_BARS = 12
URGENT_LIMIT = 10
_FINDING_KINDS = {3: "provenance conflict", 2: "modified", 1: "unowned"}
_FINDING_WHY = {
    3: "the bytes differ from the vendor's signed reference catalog (tampered or replaced)",
    2: "the bytes differ from what the owning package installed",
    1: "no package owns the file (copied in by hand or by a build step)",
}


def overview(session: Session, now: datetime, scope: AssetScope | None = None) -> dict[str, Any]:
    """The overview page's figures, a handful of aggregate statements (over the caller's
    ``scope``: a team sees its own fleet)."""
    kinds = repo.asset_kinds(session, scope)
    files, integrity_ok, provenance_ok, modified, unowned, conflict = repo.file_verdicts(
        session, scope
    )
    modified_assets, unowned_assets = repo.finding_assets(session, scope)
    decisions = repo.decisions_since(session, now - timedelta(days=7), scope)
    versions: dict[str, list[tuple[str, int]]] = {family: [] for family, _ in CHARTED_FAMILIES}
    for family, version, count in repo.versions_in_use(session, list(versions), scope):
        versions[family].append((version, int(count)))
    for family, counted in versions.items():
        # the most used first, then by version; the chart shows the first CHART_BARS
        versions[family] = sorted(counted, key=lambda vc: (-vc[1], vc[0]))[:CHART_BARS]
    feed = vulnerabilities.feed_summary(session)
    urgent = [
        {
            "rank": rank,
            "finding": _FINDING_KINDS[rank],
            "why": _FINDING_WHY[rank],
            "asset": {"id": asset_id, "kind": kind, "name": name},
            "files": int(count),
            "example_path": path,
            "family": family,
            "version": version,
            "last_seen": last_seen,
        }
        for rank, asset_id, kind, name, count, path, family, version, last_seen in (
            repo.urgent_findings(session, URGENT_LIMIT, scope)
        )
    ]
    return {
        "images": kinds.get("image", 0),
        "hosts": kinds.get("host", 0),
        "files": int(files),
        "integrity_verified": int(integrity_ok),
        "provenance_verified": int(provenance_ok),
        "modified": {"files": int(modified), "assets": int(modified_assets)},
        "unowned": {"files": int(unowned), "assets": int(unowned_assets)},
        "provenance_conflicts": int(conflict),
        "digest_conflicts": repo.digest_conflict_count(session, scope),
        "decisions": {d: decisions.get(d, 0) for d in ("allow", "warn", "deny")},
        "versions": versions,
        "urgent": urgent,
        "advisories": {
            "assets_affected": advisories.assets_affected_by_severity(session, scope),
            **{k: feed[k] for k in ("documents", "imported_at")},
        },
    }
