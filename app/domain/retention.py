"""Retention of scan history: keep each asset's N newest scans, or its scans of the last D
days, or both (a scan then stays while either rule keeps it); an asset's latest scan always
stays, so current state, where-used, compliance and the gate never change under pruning.

Applied two ways (docs/operations.md, "Retention"): after each ingest, to the reporting
asset's own history, in the ingest's transaction (the asset row is locked there, so it never
races another report of the asset); and fleet-wide by `gpuprov db prune`, in batches of short
transactions, which also covers assets that stopped reporting. On PostgreSQL with the history
tables partitioned by month, `prune` drops whole partitions that hold only prunable rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.settings import Settings
from app.storage.repositories import retention as repo
from app.storage.repositories.retention import Rows
from app.storage.session import Database


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How much history each asset keeps; None: no limit of that kind."""

    keep_scans: int | None = None
    keep_days: int | None = None

    def __post_init__(self) -> None:
        if self.keep_scans is None and self.keep_days is None:
            raise ValueError("a retention policy needs keep_scans or keep_days")
        if (self.keep_scans is not None and self.keep_scans < 1) or (
            self.keep_days is not None and self.keep_days < 1
        ):
            raise ValueError("keep_scans and keep_days are at least 1")

    def cutoff(self, now: datetime) -> datetime | None:
        """Scans before this time are past the days rule."""
        return now - timedelta(days=self.keep_days) if self.keep_days is not None else None

    def describe(self) -> str:
        """The rules in words."""
        rules = []
        if self.keep_scans is not None:
            rules.append(f"the {self.keep_scans} newest scans")
        if self.keep_days is not None:
            rules.append(f"the scans of the last {self.keep_days} days")
        return " or ".join(rules) + " of each asset, and always its latest"


def retention_of(settings: Settings) -> RetentionPolicy | None:
    """The service's retention setting (``GPUPROV_RETENTION_*``), None when history is kept."""
    if settings.retention_keep_scans is None and settings.retention_days is None:
        return None
    return RetentionPolicy(settings.retention_keep_scans, settings.retention_days)


def prune_asset(
    session: Session, policy: RetentionPolicy, asset_id: int, now: datetime, spare: int
) -> Rows:
    """Drop the history of one asset that the policy lets go (the caller holds the asset's row
    lock and commits); ``spare``, the scan just stored, stays until the next prune."""
    conn = session.connection()
    ids = repo.next_batch(
        conn,
        repo.prunable(policy.keep_scans, policy.cutoff(now), asset_id=asset_id, spare=spare),
        1_000,
    )
    return repo.delete_scans(conn, ids)


@dataclass
class PruneResult:
    """What a prune removed (or, dry, would remove)."""

    rows: Rows = field(default_factory=Rows)
    partitions: list[str] = field(default_factory=list)  # dropped whole (PostgreSQL)
    dry_run: bool = False


def prune(
    db: Database,
    policy: RetentionPolicy,
    now: datetime,
    *,
    dry_run: bool = False,
    batch_size: int = 1_000,
) -> PruneResult:
    """Apply the policy to the whole fleet: drop the partitions holding only prunable rows,
    then delete the remaining prunable scans ``batch_size`` at a time, one transaction each,
    so no lock is held long. ``dry_run`` counts what would go and changes nothing."""
    ids = repo.prunable(policy.keep_scans, policy.cutoff(now))
    result = PruneResult(dry_run=dry_run)
    if dry_run:
        with db.transaction() as session:
            result.rows = repo.count(session.connection(), ids)
            result.partitions = [
                p.name
                for p in repo.partitions(session.connection())
                if repo.partition_droppable(session.connection(), p, ids)
            ]
        return result
    with db.transaction() as session:  # checked first: the drops then hold their locks briefly
        conn = session.connection()
        droppable = [p for p in repo.partitions(conn) if repo.partition_droppable(conn, p, ids)]
    dropped = Rows()
    with db.transaction(write=True) as session:
        conn = session.connection()
        repo.ensure_partitions(conn)  # the months ahead, so no row lands in the default one
        # an old month never gains rows (new rows are stamped now), and a scan the rules let
        # go never comes back: what was droppable still is
        for partition in droppable:
            rows = repo.partition_rows(conn, partition)
            dropped = dropped + Rows(**{partition.parent: rows})
            repo.drop_partition(conn, partition)
            result.partitions.append(partition.name)
    # computed once: a scan the rules let go never comes back (new reports only add newer
    # scans, and an asset's latest only moves to a new scan), so batches need no new ranking
    with db.transaction() as session:
        chosen = repo.next_batch(session.connection(), ids, None)
        assets = repo.count(session.connection(), ids).asset if chosen else 0
    total = dropped
    for start in range(0, len(chosen), batch_size):
        with db.transaction(write=True) as session:
            total = total + repo.delete_scans(
                session.connection(), chosen[start : start + batch_size]
            )
    total = replace(total, asset=assets)
    result.rows = total
    return result
