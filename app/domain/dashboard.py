"""What the dashboard's pages show beyond the API's answers: an asset's compliance grouped per
framework, and the overview's fleet figures (aggregated in SQL, a few statements per page)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
