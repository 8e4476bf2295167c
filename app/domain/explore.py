"""What the dashboard's libraries, drift, compliance and policy pages show, as plain data:
file search by name or digest, environment parity, the assets that changed at their last scan,
the controls catalog's frameworks, and the line diff between two policy versions.

Counting and paging happen in SQL (`app.storage.repositories.explore`); the rest reuses the
inventory, compliance and policy services.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.domain import gate, policies
from app.domain.inventory import history
from app.domain.report_parser import check_label
from app.errors import BadRequest, InvalidReport, NotFound
from app.storage.repositories import explore as repo
from app.storage.repositories import inventory as inventory_repo
from app.storage.repositories.scopes import AssetScope
from scanner.policy.controls import default_catalog

_SHA256 = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")
#: longest file name searched for (a stored name is a path's last part)
MAX_NAME = 255


def _page(items: list[dict[str, Any]], total: int, limit: int, offset: int) -> dict[str, Any]:
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def search_files(
    session: Session, q: str, limit: int, offset: int, scope: AssetScope | None = None
) -> dict[str, Any]:
    """Current library files whose SHA-256 is ``q`` (64 hex digits, ``sha256:`` optional) or
    whose file name is ``q`` (exact, or a glob with ``*``); says which it searched by."""
    q = q.strip()
    if not q:
        raise BadRequest("give a SHA-256 or a file name to search for")
    digest = _SHA256.fullmatch(q)
    if digest:
        by, rows, total = (
            "sha256",
            *repo.current_files(
                session, sha256=digest.group(1).lower(), limit=limit, offset=offset, scope=scope
            ),
        )
    else:
        name = q.rsplit("/", 1)[-1]
        if not name or len(name) > MAX_NAME or name.strip("*") == "":
            raise BadRequest(f"a file name is 1 to {MAX_NAME} characters, not only '*'")
        by, rows, total = (
            "name",
            *repo.current_files(session, name=name, limit=limit, offset=offset, scope=scope),
        )
    return {"by": by, **_page([dict(r) for r in rows], total, limit, offset)}


def parity(
    session: Session,
    key: str,
    target: str,
    baseline: str,
    family: str | None,
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> dict[str, Any]:
    """Library versions that assets labelled ``key=target`` run and no asset labelled
    ``key=baseline`` runs (e.g. versions in env=prod never seen in env=staging), among the
    caller's ``scope``."""
    for value in (target, baseline):
        try:
            check_label(key, value)
        except InvalidReport as e:
            raise BadRequest(e.message) from e
    rows, total = repo.parity_gaps(session, key, target, baseline, family, limit, offset, scope)
    items = [{"family": f, "version": v, "assets": n} for f, v, n in rows]
    return {
        "label": key,
        "target": {"value": target, "assets": repo.labelled_count(session, key, target, scope)},
        "baseline": {
            "value": baseline,
            "assets": repo.labelled_count(session, key, baseline, scope),
        },
        **_page(items, total, limit, offset),
    }


def _changes(session: Session, asset_ids: list[int]) -> dict[int, dict[str, Any]]:
    """For each asset with two scans: files added, removed and changed (digest or version)
    from the earlier scan to the latest."""
    pairs = {
        a: ids
        for a, ids in inventory_repo.last_two_scans(session, asset_ids).items()
        if len(ids) == 2
    }
    by_scan = history.by_key(
        inventory_repo.scan_change_facts(session, [i for ids in pairs.values() for i in ids])
    )
    return {
        asset_id: {
            "from_scan": old_id,
            **history.compare(by_scan.get(old_id, {}), by_scan.get(new_id, {})),
        }
        for asset_id, (new_id, old_id) in pairs.items()
    }


def recent_changes(
    session: Session, limit: int, offset: int, scope: AssetScope | None = None
) -> dict[str, Any]:
    """A page of the assets scanned more than once, latest first, each with what changed
    between its last two scans (files added, removed, changed; nothing when none did)."""
    rows, total = repo.rescanned_assets(session, limit, offset, scope)
    changes = _changes(session, [r[0] for r in rows])
    items = []
    for asset_id, kind, name, latest in rows:
        change = changes.get(
            asset_id, {"from_scan": None, "added": [], "removed": [], "changed": []}
        )
        items.append(
            {"asset": {"id": asset_id, "kind": kind, "name": name}, "to_scan": latest, **change}
        )
    return _page(items, total, limit, offset)


def frameworks() -> list[dict[str, str]]:
    """The frameworks of the controls catalog (id, title, source)."""
    return [
        {"id": f.id, "title": f.title, "source": f.source} for f in default_catalog().frameworks
    ]


def framework_ids() -> tuple[str, ...]:
    """The ids of the controls catalog's frameworks."""
    return tuple(f.id for f in default_catalog().frameworks)


def policy_diff(session: Session, name: str, old: int, new: int) -> dict[str, Any]:
    """The line diff of two stored versions of a policy (404 when either is missing): lines
    tagged ``hunk``, ``add``, ``remove`` or ``same``."""
    before = policies.stored(session, name, old)
    after = policies.stored(session, name, new)
    lines = []
    diff = difflib.unified_diff(
        before.document.splitlines(),
        after.document.splitlines(),
        f"{name} v{old}",
        f"{name} v{new}",
        lineterm="",
    )
    for line in list(diff)[2:]:
        tag = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+")
            else "remove"
            if line.startswith("-")
            else "same"
        )
        lines.append({"tag": tag, "text": line})
    return {
        "name": name,
        "from": policies.policy_dict(before),
        "to": policies.policy_dict(after),
        "lines": lines,
    }


def decision(session: Session, decision_id: int, scope: AssetScope | None = None) -> dict[str, Any]:
    """One recorded gate decision with its reasons and controls (404 when there is none, or it
    is on an asset outside the caller's ``scope``)."""
    row = repo.decision_by_id(session, decision_id, scope)
    if row is None:
        raise NotFound(f"no gate decision {decision_id}")
    return gate.decision_dict(row)


def policy_names(session: Session) -> list[str]:
    """The stored promotion policies' names."""
    return repo.policy_names(session)


#: how far back "the policy the gate uses most" looks
GATED_WINDOW = timedelta(days=30)


@dataclass(frozen=True, slots=True)
class ChosenPolicy:
    """The policy a compliance page shows, and why that one (the page says so)."""

    name: str | None
    why: str  # "asked", "configured", "most-gated", "first", "none"
    #: the configured default when it names no stored policy (the page says it was passed over)
    missing_default: str | None = None


def choose_policy(
    session: Session, asked: str | None, default: str | None, now: datetime
) -> ChosenPolicy:
    """The policy a compliance page shows: the one asked for, else the configured default
    (``GPUPROV_DEFAULT_POLICY``) when stored, else the one gated most in the last 30 days,
    else the first by name."""
    if asked:
        return ChosenPolicy(asked, "asked")
    names = policy_names(session)
    missing = default if default and default not in names else None
    if default and default in names:
        return ChosenPolicy(default, "configured")
    counts = repo.decision_counts(session, now - GATED_WINDOW)
    gated = [n for n in names if counts.get(n)]
    if gated:
        # most decisions first, then by name: the same answer on every request
        return ChosenPolicy(min(gated, key=lambda n: (-counts[n], n)), "most-gated", missing)
    if names:
        return ChosenPolicy(names[0], "first", missing)
    return ChosenPolicy(None, "none", missing)
