"""Retention of scan history on SQLite and PostgreSQL: `prune` keeps each asset's N newest
scans or its scans of the last D days, never an asset's latest scan, takes a scan's rows in
every history table with it, counts the same dry; the service prunes the reporting asset after
each ingest when `GPUPROV_RETENTION_*` is set; `gpuprov db prune` reports its counts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.domain.retention import RetentionPolicy, prune
from app.main import create_app
from app.settings import Settings
from app.storage.tables import GateDecision
from tests.app import boms
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.app.test_cli import _run

NOW = datetime.now(UTC).replace(microsecond=0)


def _report(name: str, hours_ago: float) -> bytes:
    when = (NOW - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return boms.encode(boms.gpuprov_bom(kind="host", name=name, timestamp=when))


def _history(service: Service) -> dict[str, list[int]]:
    """Each asset's scans, newest first, as hours before NOW."""
    with service.db.session() as session:
        rows = session.execute(
            text(
                "SELECT a.name, s.scanned_at FROM scan s JOIN asset a ON a.id = s.asset_id "
                "ORDER BY a.name, s.scanned_at DESC"
            )
        ).all()
    history: dict[str, list[int]] = {}
    for name, scanned_at in rows:
        when = (
            scanned_at if isinstance(scanned_at, datetime) else datetime.fromisoformat(scanned_at)
        )
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when
        history.setdefault(name, []).append(round((NOW - when).total_seconds() / 3600))
    return history


def _whole(service: Service) -> None:
    """Every remaining scan has its raw report and library rows, and nothing else remains."""
    with service.db.session() as session:
        orphans = session.execute(
            text(
                "SELECT (SELECT count(*) FROM raw_bom WHERE scan_id NOT IN (SELECT id FROM scan)),"
                " (SELECT count(*) FROM artifact WHERE scan_id NOT IN (SELECT id FROM scan)),"
                " (SELECT count(*) FROM package WHERE scan_id NOT IN (SELECT id FROM scan)),"
                " (SELECT count(*) FROM scan WHERE id NOT IN (SELECT scan_id FROM raw_bom)),"
                " (SELECT count(*) FROM asset WHERE latest_scan_id IS NULL"
                "  OR latest_scan_id NOT IN (SELECT id FROM scan))"
            )
        ).one()
    assert tuple(orphans) == (0, 0, 0, 0, 0)


@pytest.fixture
def fleet(service: Service, post_report: Callable[..., Any]) -> dict[str, list[int]]:
    """node-a: six scans an hour apart; node-b: two recent; node-c: three, all past 5 days."""
    ages = {"node-a": [6, 5, 4, 3, 2, 1], "node-b": [2, 1], "node-c": [240, 216, 192]}
    for name, hours in ages.items():
        for h in hours:
            assert post_report(_report(name, h)).status_code == 201
    return _history(service)


def test_keep_scans_dry_then_for_real(service: Service, fleet: dict[str, list[int]]) -> None:
    assert fleet == {"node-a": [1, 2, 3, 4, 5, 6], "node-b": [1, 2], "node-c": [192, 216, 240]}
    before = service.stored()
    files = before["artifact"] // before["scan"]
    packages = before["package"] // before["scan"]
    policy = RetentionPolicy(keep_scans=2)
    dry = prune(service.db, policy, NOW, dry_run=True)
    assert service.stored() == before  # a dry run changes nothing
    assert (dry.rows.scan, dry.rows.asset) == (5, 2)  # 4 of node-a, 1 of node-c
    assert (dry.rows.raw_bom, dry.rows.artifact, dry.rows.package) == (
        5,
        5 * files,
        5 * packages,
    )
    done = prune(service.db, policy, NOW, batch_size=2)  # three transactions
    assert done.rows == dry.rows and done.partitions == []
    assert _history(service) == {"node-a": [1, 2], "node-b": [1, 2], "node-c": [192, 216]}
    after = service.stored()
    assert after["scan"] == before["scan"] - 5 and after["raw_bom"] == after["scan"]
    assert after["asset_library"] == before["asset_library"]  # current state untouched
    _whole(service)
    assert prune(service.db, policy, NOW).rows.scan == 0  # nothing left to do


def test_audit_rows_outlive_their_scan(service: Service, fleet: dict[str, list[int]]) -> None:
    with service.db.transaction(write=True) as session:
        oldest = session.execute(text("SELECT min(id) FROM scan")).scalar_one()
        session.add(
            GateDecision(
                decided_at=NOW,
                token_name="ci",
                policy_name="prod",
                policy_version=1,
                policy_sha256="0" * 64,
                decision="allow",
                subject_kind="host",
                subject_name="node-a",
                scan_id=oldest,
                reasons=[],
                controls={},
            )
        )
    assert prune(service.db, RetentionPolicy(keep_scans=1), NOW).rows.scan == 8
    with service.db.session() as session:
        kept = session.execute(text("SELECT scan_id, decision FROM gate_decision")).all()
    assert [tuple(r) for r in kept] == [(None, "allow")]


def test_keep_days_never_drops_the_latest(service: Service, fleet: dict[str, list[int]]) -> None:
    prune(service.db, RetentionPolicy(keep_days=5), NOW)
    # node-c has not reported for 8 days: its latest scan stays, its older ones go
    assert _history(service) == {"node-a": [1, 2, 3, 4, 5, 6], "node-b": [1, 2], "node-c": [192]}
    _whole(service)


def test_both_rules_keep_what_either_keeps(service: Service, fleet: dict[str, list[int]]) -> None:
    prune(service.db, RetentionPolicy(keep_scans=2, keep_days=5), NOW)
    # node-a: all within 5 days; node-c: past 5 days but its 2 newest are kept by count
    assert _history(service) == {
        "node-a": [1, 2, 3, 4, 5, 6],
        "node-b": [1, 2],
        "node-c": [192, 216],
    }


def test_policy_needs_a_rule() -> None:
    with pytest.raises(ValueError, match="keep_scans or keep_days"):
        RetentionPolicy()
    with pytest.raises(ValueError, match="at least 1"):
        RetentionPolicy(keep_scans=0)


def test_the_service_prunes_the_reporting_asset_after_ingest(service: Service) -> None:
    settings = Settings(database_url=service.url, environment="test", retention_keep_scans=2)
    writer = service.token("report:write")
    with TestClient(create_app(settings)) as client:

        def post(name: str, hours: float) -> int:
            answer = client.post(
                "/api/v1/reports",
                content=_report(name, hours),
                headers=auth(writer, **JSON_HEADERS),
            )
            return int(answer.status_code)

        for hours in (4, 3, 2, 1):
            assert post("node-r", hours) == 201
        assert post("node-other", 5) == 201
        assert _history(service) == {"node-other": [5], "node-r": [1, 2]}
        # a late report older than the kept ones is stored, and goes with the next report
        assert post("node-r", 10) == 201
        assert _history(service)["node-r"] == [1, 2, 10]
        assert post("node-r", 0.5) == 201
        assert _history(service)["node-r"] == [0, 1]
    _whole(service)


def test_db_prune_command(service: Service, fleet: dict[str, list[int]]) -> None:
    code, _, err = _run(
        "db", "prune", "--keep-scans", "3", "--dry-run", "--database-url", service.url
    )
    assert code == 0, err
    assert "would prune 3 scan(s) of 1 asset(s): raw reports 3, library files" in err
    assert "kept: the 3 newest scans of each asset, and always its latest" in err
    assert _history(service) == fleet
    code, _, err = _run(
        "db", "prune", "--keep-scans", "3", "--keep-days", "5", "--database-url", service.url
    )
    assert code == 0, err
    assert "pruned 0 scan(s)" in err  # node-a's scans are all within 5 days
    code, _, err = _run("db", "prune", "--keep-days", "5", "--database-url", service.url)
    assert code == 0 and "pruned 2 scan(s) of 1 asset(s)" in err, err
    assert _history(service)["node-c"] == [192]


def test_db_prune_needs_a_rule(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPROV_RETENTION_KEEP_SCANS", raising=False)
    monkeypatch.delenv("GPUPROV_RETENTION_DAYS", raising=False)
    code, _, err = _run("db", "prune", "--database-url", service.url)
    assert code == 2 and "nothing to prune by: give --keep-scans or --keep-days" in err
    monkeypatch.setenv("GPUPROV_RETENTION_KEEP_SCANS", "1")
    code, _, err = _run("db", "prune", "--dry-run", "--database-url", service.url)
    assert code == 0 and "would prune 0 scan(s)" in err, err
