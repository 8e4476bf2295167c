"""Fleet compliance following a change to what the advisories rule sees (a feed document, an
analysis, an accepted proposal): in the request's transaction on a small fleet, else after the
answer, for the API and the dashboard alike."""

from __future__ import annotations

from datetime import datetime

from fastapi import BackgroundTasks

from app.domain import compliance
from app.http.deps import DatabaseDep, WriteSessionDep


def follow_advisories_change(
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    now: datetime,
    *,
    author: str | None = None,
) -> None:
    """Re-evaluate the policies with an ``advisories`` rule; with ``author`` (an analysis),
    only when that author is on GPUPROV_VEX_TRUSTED_AUTHORS: no other changes the gate."""
    trusted = db.settings.trusted_authors
    if author is not None and author not in trusted:
        return
    pending = compliance.reevaluate_after_advisories_change(session, now, trusted)
    if pending:
        background.add_task(compliance.reevaluate_pending_all, db, pending, now)
