"""Current-state and history queries behind the inventory API.

Current state is read only through ``artifact.is_current`` (partial indexes) and the
`AssetLibrary` summary; history is read only for one asset at a time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Row,
    RowMapping,
    Select,
    String,
    and_,
    bindparam,
    case,
    distinct,
    exists,
    func,
    or_,
    select,
)
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased

from app.storage.repositories import explore, fleet, scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import (
    Artifact,
    Asset,
    AssetFileVerdicts,
    AssetLabel,
    AssetLibrary,
    GateDecision,
    NodeGpu,
    Package,
    Scan,
)


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Plain criteria on a version column and its sortable key (``Artifact.version_key``): keys
    in ``[lower, upper)``, or one exact string. The domain builds them from a version expression
    (the version rule lives in ``scanner.versions``); storage only compares."""

    lower: str | None = None
    upper: str | None = None
    exact: str | None = None


@dataclass(frozen=True, slots=True)
class LibraryMatch:
    """Which current library rows a query selects (every given filter must hold)."""

    family: str | None = None
    version: VersionRange | None = None
    sha256: str | None = None
    #: an integrity or a provenance verdict (either matches)
    verdict: str | None = None
    integrity: str | None = None
    provenance: str | None = None
    #: True: mapped by a live process (a --runtime scan); False: mapped by none
    loaded: bool | None = None

    @property
    def by_file(self) -> bool:
        """Whether a condition needs the file rows (the summary holds family and version)."""
        return bool(
            self.sha256
            or self.verdict
            or self.integrity
            or self.provenance
            or self.loaded is not None
        )

    @property
    def any(self) -> bool:
        """Whether any library condition is given."""
        return self.by_file or bool(self.family) or self.version is not None

    def conditions(self) -> list[ColumnElement[bool]]:
        """SQL conditions on `Artifact` (always restricted to current rows)."""
        conds: list[ColumnElement[bool]] = [Artifact.is_current.expression]
        if self.family:
            conds.append(Artifact.family == self.family)
        if self.version is not None:
            conds.append(_version_condition(Artifact.version, Artifact.version_key, self.version))
        if self.sha256:
            conds.append(Artifact.sha256 == self.sha256)
        if self.verdict:
            verdict = _inline(self.verdict)
            conds.append(or_(Artifact.integrity == verdict, Artifact.provenance == verdict))
        if self.integrity:
            conds.append(Artifact.integrity == _inline(self.integrity))
        if self.provenance:
            conds.append(Artifact.provenance == _inline(self.provenance))
        if self.loaded is not None:
            conds.append(
                Artifact.loaded_processes > 0 if self.loaded else Artifact.loaded_processes == 0
            )
        return conds

    def summary_conditions(self) -> list[ColumnElement[bool]]:
        """The family/version part as conditions on `AssetLibrary` (a few rows per asset)."""
        conds: list[ColumnElement[bool]] = []
        if self.family:
            conds.append(AssetLibrary.family == self.family)
        if self.version is not None:
            conds.append(
                _version_condition(AssetLibrary.version, AssetLibrary.version_key, self.version)
            )
        return conds


def _inline(verdict: str) -> BindParameter[str]:
    """A verdict written into the statement, not bound: verdicts are a few values of very
    different frequency, and PostgreSQL's generic plan for a bound one (chosen once psycopg
    prepares a repeated statement) walks every asset (1.2 s at 10,000 assets instead of 0.1 s).
    The domain checks the value against the vocabulary first."""
    return bindparam(None, verdict, type_=String(), literal_execute=True)


def _version_condition(
    version: InstrumentedAttribute[str | None],
    key: InstrumentedAttribute[str | None],
    spec: VersionRange,
) -> ColumnElement[bool]:
    if spec.exact is not None:
        return version == spec.exact
    conds = []
    if spec.lower is not None:
        conds.append(key >= spec.lower)
    if spec.upper is not None:
        conds.append(key < spec.upper)
    return and_(*conds) if conds else key.is_not(None)


@dataclass(frozen=True, slots=True)
class AssetQuery:
    """Filters of the asset list."""

    kind: str | None = None
    name: str | None = None  # exact, or a glob with '*'
    labels: Sequence[tuple[str, str]] = ()
    match: LibraryMatch = field(default_factory=LibraryMatch)
    min_slsa_level: int | None = None  # the latest scan's verified SLSA Build level, at least
    signed: bool | None = None  # whether the latest scan names an accepted image signer
    gpu_model: str | None = None  # a host GPU's model: exact, or a glob with '*'
    status: str | None = None  # the worst verdict of its current files (`STATUSES`)
    gate: str | None = None  # a latest decision under some policy, or "none" (never gated)
    #: the caller's asset scope (None: the whole fleet); every asset query applies it
    scope: AssetScope | None = None


#: an asset's status: the worst integrity or provenance verdict of its current GPU library
#: files, worst first ("none": no GPU library file)
STATUSES = ("conflict", "modified", "unowned", "no-record", "verified", "none")
#: the asset list's orders: a column, ``-`` before it for the other way (status: worst first)
SORTS = ("name", "status", "scanned", "libraries")


def status_rank() -> ColumnElement[int]:
    """The index in `STATUSES` of an asset's status, from its kept verdict counts (outer
    joined: an asset without counts has no file)."""
    v = AssetFileVerdicts
    return case(
        (v.provenance_conflict > 0, 0),
        (v.modified > 0, 1),
        (v.unowned > 0, 2),
        (v.integrity_verified < v.files, 3),
        (v.files > 0, 4),
        else_=5,
    )


def latest_decision_ids() -> Select[int]:
    """The ids of each asset's latest decision under each policy (ids grow with time)."""
    return (
        select(func.max(GateDecision.id))
        .where(GateDecision.asset_id.is_not(None))
        .group_by(GateDecision.asset_id, GateDecision.policy_name)
    )


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _asset_conditions(query: AssetQuery) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if query.scope is not None:
        conds.append(scopes.asset_condition(query.scope))
    if query.kind:
        conds.append(Asset.kind == query.kind)
    if query.name:
        if "*" in query.name:
            pattern = "%".join(_escape_like(p) for p in query.name.split("*"))
            conds.append(Asset.name.like(pattern, escape="\\"))
        else:
            conds.append(Asset.name == query.name)
    if query.labels:
        conds.append(Asset.id.in_(_labelled(query.labels)))
    if query.min_slsa_level is not None:
        conds.append(_latest_scan(_LATEST.slsa_level >= query.min_slsa_level))
    if query.signed is not None:
        signed = _latest_scan(_LATEST.image_signer.is_not(None))
        conds.append(signed if query.signed else ~signed)
    if query.gpu_model:
        if "*" in query.gpu_model:
            pattern = "%".join(_escape_like(p) for p in query.gpu_model.split("*"))
            model: ColumnElement[bool] = NodeGpu.model.like(pattern, escape="\\")
        else:
            model = NodeGpu.model == query.gpu_model
        conds.append(Asset.id.in_(select(NodeGpu.host_id).where(model)))
    if query.status is not None:
        conds.append(status_rank() == STATUSES.index(query.status))
    if query.gate == "none":
        conds.append(
            Asset.id.not_in(select(GateDecision.asset_id).where(GateDecision.asset_id.is_not(None)))
        )
    elif query.gate is not None:
        gated = select(GateDecision.asset_id).where(
            GateDecision.id.in_(latest_decision_ids()), GateDecision.decision == query.gate
        )
        conds.append(Asset.id.in_(gated))
    match = query.match
    if match.by_file:
        conds.append(Asset.id.in_(select(Artifact.asset_id).where(*match.conditions())))
    elif match.any:
        conds.append(Asset.id.in_(select(AssetLibrary.asset_id).where(*match.summary_conditions())))
    return conds


def _labelled(labels: Sequence[tuple[str, str]]) -> Select[int]:
    """Ids of the assets carrying every one of ``labels``: one pass over the matching label
    rows (index on key, value), counted per asset, whatever the number of labels. An asset has
    one value per key, so it matches every distinct pair exactly when its count is theirs."""
    pairs = sorted(set(labels))
    matching = or_(*(and_(AssetLabel.key == k, AssetLabel.value == v) for k, v in pairs))
    return (
        select(AssetLabel.asset_id)
        .where(matching)
        .group_by(AssetLabel.asset_id)
        .having(func.count() == len(pairs))
    )


#: the latest scan inside filters (aliased: the asset list also joins `Scan` itself)
_LATEST = aliased(Scan)


def _latest_scan(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    # correlated on the primary key: one index probe per asset, never a pass over history
    return exists().where(_LATEST.id == Asset.latest_scan_id, condition)


def _order(sort: str | None) -> list[ColumnElement[Any]]:
    if sort is None:
        return [Asset.id.asc()]
    column = sort.lstrip("-")
    keys: dict[str, ColumnElement[Any]] = {
        "name": Asset.name.expression,
        "status": status_rank(),
        "scanned": Asset.latest_scanned_at.expression,
        "libraries": func.coalesce(Scan.library_count, 0),
    }
    key = keys[column]
    return [key.desc() if sort.startswith("-") else key.asc(), Asset.id.asc()]


def list_assets(
    session: Session, query: AssetQuery, limit: int, offset: int, sort: str | None = None
) -> tuple[Sequence[Row[Asset, Scan]], int]:
    """A page of assets with their latest scan, and the total count; ``sort`` one of `SORTS`
    (``-`` before it: the other way), else by id."""
    conds = _asset_conditions(query)
    counted = select(func.count()).select_from(Asset)
    if query.status is not None:
        counted = counted.outerjoin(AssetFileVerdicts, AssetFileVerdicts.asset_id == Asset.id)
    total = session.scalar(counted.where(*conds)) or 0
    rows = session.execute(
        select(Asset, Scan)
        .outerjoin(Scan, Scan.id == Asset.latest_scan_id)
        .outerjoin(AssetFileVerdicts, AssetFileVerdicts.asset_id == Asset.id)
        .where(*conds)
        .order_by(*_order(sort))
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, total


def file_verdicts(session: Session, asset_ids: Sequence[int]) -> dict[int, AssetFileVerdicts]:
    """The kept verdict counts of the assets' current files, by asset."""
    if not asset_ids:
        return {}
    rows = session.scalars(
        select(AssetFileVerdicts).where(AssetFileVerdicts.asset_id.in_(asset_ids))
    )
    return {r.asset_id: r for r in rows}


def current_artifacts(session: Session, asset_id: int) -> Sequence[Artifact]:
    """The GPU libraries of the asset's latest scan."""
    return session.scalars(
        select(Artifact)
        .where(Artifact.is_current, Artifact.asset_id == asset_id)
        .order_by(Artifact.family, Artifact.path, Artifact.id)
    ).all()


def scan_artifacts(session: Session, scan_ids: Sequence[int]) -> Sequence[Artifact]:
    """The GPU libraries of the given scans."""
    if not scan_ids:
        return []
    return session.scalars(
        select(Artifact).where(Artifact.scan_id.in_(scan_ids)).order_by(Artifact.id)
    ).all()


def scan_change_facts(
    session: Session, scan_ids: Sequence[int]
) -> Sequence[Row[int, str, str | None, str, str, str | None, str | None]]:
    """What a comparison of scans needs of their GPU libraries, as plain rows in id order:
    (scan_id, kind, path, family, name, version, sha256). Building ORM objects of every
    column for a page of assets' last two scans dominated the drift answer (12,000 rows:
    ~150 ms at 20,000 assets, bench/fleet.py)."""
    if not scan_ids:
        return []
    # Core on the session's connection: plain rows without the ORM execution layer
    return (
        session.connection()
        .execute(
            select(
                Artifact.scan_id,
                Artifact.kind,
                Artifact.path,
                Artifact.family,
                Artifact.name,
                Artifact.version,
                Artifact.sha256,
            )
            .where(Artifact.scan_id.in_(scan_ids))
            .order_by(Artifact.id)
        )
        .all()
    )


def scan_packages(session: Session, scan_id: int) -> Sequence[Package]:
    """The packages stored with a scan."""
    return session.scalars(
        select(Package).where(Package.scan_id == scan_id).order_by(Package.id)
    ).all()


def history(session: Session, asset_id: int, limit: int) -> Sequence[Scan]:
    """The asset's most recent scans, newest first."""
    return session.scalars(
        select(Scan)
        .where(Scan.asset_id == asset_id)
        .order_by(Scan.scanned_at.desc(), Scan.id.desc())
        .limit(limit)
    ).all()


def last_two_scans(session: Session, asset_ids: Sequence[int]) -> dict[int, list[int]]:
    """For each asset, the ids of its two most recent scans, newest first."""
    if not asset_ids:
        return {}
    ranked = (
        select(
            Scan.asset_id,
            Scan.id,
            func.row_number()
            .over(
                partition_by=Scan.asset_id,
                order_by=(Scan.scanned_at.desc(), Scan.id.desc()),
            )
            .label("rank"),
        )
        .where(Scan.asset_id.in_(asset_ids))
        .subquery()
    )
    found: dict[int, list[int]] = {}
    for asset_id, scan_id in session.execute(
        select(ranked.c.asset_id, ranked.c.id)
        .where(ranked.c.rank <= 2)
        .order_by(ranked.c.asset_id, ranked.c.rank)
    ):
        found.setdefault(asset_id, []).append(scan_id)
    return found


_WHERE_USED_COLUMNS = (
    Artifact.asset_id,
    Artifact.kind,
    Artifact.path,
    Artifact.family,
    Artifact.component,
    Artifact.version,
    Artifact.cuda_major,
    Artifact.sha256,
    Artifact.integrity,
    Artifact.provenance,
    Artifact.loaded_processes,
    Artifact.loaded_containers,
    Artifact.loaded_deleted,
    Artifact.loaded_copy,
    Artifact.disk_sha256,
)


def loaded_drift(
    session: Session, family: str | None, limit: int, scope: AssetScope | None = None
) -> Sequence[Row[int, str | None, str, str | None, str | None, str | None, int, int, bool]]:
    """Current files (of the scope's assets) whose loaded bytes differ from the file at their
    path on disk."""
    conds = [Artifact.is_current, Artifact.disk_sha256.is_not(None)]
    visible = scopes.in_scope(Artifact.asset_id, scope)
    if visible is not None:
        conds.append(visible)
    if family:
        conds.append(Artifact.family == family)
    return session.execute(
        select(
            Artifact.asset_id,
            Artifact.path,
            Artifact.family,
            Artifact.version,
            Artifact.sha256,
            Artifact.disk_sha256,
            Artifact.loaded_processes,
            Artifact.loaded_containers,
            Artifact.loaded_deleted,
        )
        .where(*conds)
        .order_by(Artifact.asset_id, Artifact.path, Artifact.id)
        .limit(limit)
    ).all()


def where_used(
    session: Session, match: LibraryMatch, query: AssetQuery, limit: int, offset: int
) -> tuple[Sequence[Asset], Sequence[RowMapping], int]:
    """A page of assets (by id) holding current libraries that match, their matching files,
    and the total number of such assets.

    Family/version questions are answered from the per-asset summary (a few rows per asset),
    digest questions from the partial digest index; only the page's files are then read, as
    plain rows (building ORM objects for thousands of files would dominate the answer time).
    """
    holder: InstrumentedAttribute[int]
    if match.by_file or not match.any:
        holder = Artifact.asset_id
        conds: list[ColumnElement[bool]] = match.conditions()
    else:
        holder = AssetLibrary.asset_id
        conds = match.summary_conditions()
    asset_conds = _asset_conditions(query)
    if asset_conds:
        conds.append(holder.in_(select(Asset.id).where(*asset_conds)))
    total = session.scalar(select(func.count(distinct(holder))).where(*conds)) or 0
    page = list(
        session.scalars(
            select(holder)
            .where(*conds)
            .group_by(holder)
            .order_by(holder)
            .limit(limit)
            .offset(offset)
        )
    )
    if not page:
        return [], [], total
    assets = session.scalars(select(Asset).where(Asset.id.in_(page)).order_by(Asset.id)).all()
    files = (
        session.execute(
            select(*_WHERE_USED_COLUMNS)
            .where(*match.conditions(), Artifact.asset_id.in_(page))
            .order_by(Artifact.asset_id, Artifact.path, Artifact.id)
        )
        .mappings()
        .all()
    )
    return assets, files, total


def libraries(
    session: Session, family: str | None, limit: int, offset: int, scope: AssetScope | None = None
) -> tuple[list[tuple[str, str | None, int | None, int, int, int, int]], int]:
    """Each (family, version, CUDA major) in use (by the scope's assets), with asset, image,
    host and file counts."""
    conds = [AssetLibrary.family == family] if family else []
    visible = scopes.in_scope(AssetLibrary.asset_id, scope)
    if visible is not None:
        conds.append(visible)
    statement = (
        select(
            AssetLibrary.family,
            AssetLibrary.version,
            AssetLibrary.cuda_major,
            func.count().label("assets"),
            func.sum(case((AssetLibrary.asset_kind == "image", 1), else_=0)).label("images"),
            func.sum(case((AssetLibrary.asset_kind == "host", 1), else_=0)).label("hosts"),
            func.sum(AssetLibrary.file_count).label("files"),
            func.count().over().label("total"),
        )
        .where(*conds)
        .group_by(AssetLibrary.family, AssetLibrary.version, AssetLibrary.cuda_major)
        .order_by(
            AssetLibrary.family,
            func.max(AssetLibrary.version_key),
            AssetLibrary.version,
            AssetLibrary.cuda_major,
        )
        .limit(limit)
        .offset(offset)
    )
    rows = session.execute(statement).all()
    total = rows[0][-1] if rows else 0
    if not rows and offset:
        total = (
            session.scalar(
                select(func.count()).select_from(
                    select(AssetLibrary.family)
                    .where(*conds)
                    .group_by(AssetLibrary.family, AssetLibrary.version, AssetLibrary.cuda_major)
                    .subquery()
                )
            )
            or 0
        )
    return [tuple(r[:-1]) for r in rows], int(total)


def digest_conflicts(
    session: Session, family: str | None, limit: int, scope: AssetScope | None = None
) -> Sequence[Row[str, str | None, str | None, int | None, str | None, str, int, str]]:
    """Current files of one (family, component, version, CUDA major, arch) seen with more than
    one digest: one row per digest with its asset count and an example path."""
    # the drift page's two streaming steps: the conflicting groups over the covering index
    # (distinct pairs, no sort), then only their digests; one join of the whole fleet read every
    # current file even when nothing conflicts (2.2 s, then 3.5-7 s under load, at 20,000 assets)
    groups = explore.conflicting_groups(session, family, limit, scope)
    return explore.conflict_digests(session, groups, scope)


def version_spread(
    session: Session, family: str | None, scope: AssetScope | None = None
) -> Sequence[Row[str, str | None, int]]:
    """Assets per (family, version) in current state, by family and version: the counts kept
    at ingest (grouping the summary read 250,000 index entries at 20,000 assets, 30-110 ms);
    for a scoped caller, the summary of the scope's assets grouped."""
    if scope is None:
        return fleet.version_assets(session, [family] if family else None)
    conds = [scopes.asset_condition(scope)]
    if family:
        conds.append(AssetLibrary.family == family)
    return session.execute(
        select(AssetLibrary.family, AssetLibrary.version, func.count(distinct(Asset.id)))
        .join(Asset, Asset.id == AssetLibrary.asset_id)
        .where(*conds)
        .group_by(AssetLibrary.family, AssetLibrary.version)
        .order_by(AssetLibrary.family, AssetLibrary.version)
    ).all()


def page_asset_ids(session: Session, query: AssetQuery, limit: int, offset: int) -> list[int]:
    """A page of asset ids matching the filters."""
    return list(
        session.scalars(
            select(Asset.id)
            .where(*_asset_conditions(query))
            .order_by(Asset.id)
            .limit(limit)
            .offset(offset)
        )
    )


def export_rows(
    session: Session, batch: int = 1000, scope: AssetScope | None = None
) -> Iterator[Row[Artifact, Asset]]:
    """Every current library (of the scope's assets) with its asset, streamed in batches."""
    conds = [Artifact.is_current.expression]
    if scope is not None:
        conds.append(scopes.asset_condition(scope))
    result = session.execute(
        select(Artifact, Asset)
        .join(Asset, Asset.id == Artifact.asset_id)
        .where(*conds)
        .order_by(Artifact.asset_id, Artifact.path, Artifact.id)
        .execution_options(yield_per=batch)
    )
    yield from result


def counts(session: Session) -> dict[str, int]:
    """Totals for the metrics endpoint."""
    assets_by_kind = dict(
        session.execute(select(Asset.kind, func.count()).group_by(Asset.kind)).all()
    )
    return {
        "assets_image": int(assets_by_kind.get("image", 0)),
        "assets_host": int(assets_by_kind.get("host", 0)),
        "scans": int(session.scalar(select(func.count()).select_from(Scan)) or 0),
        "current_libraries": int(
            session.scalar(select(func.count()).select_from(Artifact).where(Artifact.is_current))
            or 0
        ),
    }
