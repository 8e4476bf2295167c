"""Runtime evidence (issue 19 §4), on SQLite and PostgreSQL: a host scanned with ``--runtime``
whose vulnerable nvJPEG no process maps gets proposals (not an analysis) with the observed
window and an expiry; none when a process maps it (deleted on disk included), when some
process's maps could not be read, without ``--runtime``, or for a finding that is not a library
file (the driver); a person with ``triage`` accepts one (an analysis authored by them, audited)
or dismisses it; a later report showing the library loaded withdraws the proposal and the
accepted analysis, as the service; another team's caller is answered 404, a viewer 403.

NVIDIA's bulletin 2025/5661 states nvJPEG of CUDA Toolkit releases before 12.9 Update 1
(CVE-2025-23272) and before 13.0 (CVE-2025-23273, -23274, -23275) affected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import text

from app.cli_advisories import import_paths
from app.clock import utcnow
from app.domain.tokens import create_token
from app.settings import Settings
from scanner.advisories.document import DEFAULT_MAX_BYTES
from scanner.bom.cyclonedx import to_json
from scanner.model import (
    AssetInfo,
    AssetKind,
    Digests,
    FileRef,
    GpuLibrary,
    Identification,
    Integrity,
    LoadedBy,
    LoadedVia,
    Product,
    RuntimeScan,
    ScanResult,
    Sha256,
)
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.app.pages import csrf_of, login
from tests.scanner.advisories.documents import PSIRT

NVJPEG_CVES = {"CVE-2025-23272", "CVE-2025-23273", "CVE-2025-23274", "CVE-2025-23275"}
LIB = "/usr/local/cuda-12.4/lib64"
NVJPEG = f"{LIB}/libnvjpeg.so.12.3.1.117"
OLD, NEW = Sha256("a" * 64), Sha256("b" * 64)
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.535.129.03"
JUSTIFICATION = "vulnerable_code_not_in_execute_path"
#: a --runtime scan that read every one of 200 processes' maps
RUNTIME = RuntimeScan("/proc", 200, 0)


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


def _lib(path: str, sha: str, family: str, version: str, *loaders: LoadedBy) -> GpuLibrary:
    return GpuLibrary(
        ref=FileRef(path),
        size=10,
        aliases=(),
        ident=Identification(family, family, version, 12, "x86_64"),
        digests=Digests(10, Sha256(sha)),
        owner=None,
        integrity=Integrity.UNOWNED,
        integrity_reason="no package",
        loaded_by=loaders,
    )


def report(
    at: datetime,
    *,
    runtime: RuntimeScan | None = RUNTIME,
    loaders: tuple[LoadedBy, ...] = (),
    sha: str = OLD,
    nvjpeg: bool = True,
    driver: bool = False,
    machine: str = "m1",
    name: str = "gpu-node-1",
) -> bytes:
    """A host report: nvJPEG of CUDA 12.4.1 (and the R535 driver's libcuda), mapped by
    ``loaders`` (nobody by default), scanned with ``runtime`` (None: without --runtime)."""
    libraries: list[GpuLibrary] = []
    products: list[Product] = []
    if nvjpeg:
        libraries.append(_lib(NVJPEG, sha, "nvjpeg", "12.3.1.117", *loaders))
        products.append(
            Product(
                "nvjpeg",
                "nvJPEG",
                "12.3.1.117",
                paths=(NVJPEG,),
                sha256=Sha256(sha),
                toolkit="12.4.1",
            )
        )
    if driver:
        libraries.append(_lib(LIBCUDA, "c" * 64, "libcuda", "535.129.03"))
        products.append(
            Product(
                "driver",
                "NVIDIA GPU Display Driver",
                "535.129.03",
                paths=(LIBCUDA,),
                sha256=Sha256("c" * 64),
                branch="R535",
            )
        )
    result = ScanResult(
        asset=AssetInfo(AssetKind.HOST, name, "/", machine_id=machine * 32),
        libraries=tuple(libraries),
        packages=(),
        findings=(),
        skipped=(),
        started_at=at.isoformat(),
        tool_version="0.test",
        runtime=runtime,
        products=tuple(products),
    )
    return to_json(result, timestamp=at).encode()


@pytest.fixture
def feed(service: Service) -> None:
    for bulletin in ("2025/5661", "2025/5703"):
        summary = import_paths(
            service.db, [PSIRT / bulletin], strict=False, max_bytes=DEFAULT_MAX_BYTES
        )
        assert summary.refused == [], summary.refused


def _push(post_report: Callable[..., Any], body: bytes) -> int:
    answer = post_report(body)
    assert answer.status_code == 201, answer.text
    return int(answer.json()["asset_id"])


def _proposals(service: Service, asset_id: int, **params: Any) -> list[dict[str, Any]]:
    reader = auth(service.token("inventory:read", name="reader"))
    answer = service.client.get(
        f"/api/v1/assets/{asset_id}/proposals", headers=reader, params=params
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def _analysis_of(service: Service, asset_id: int, cve: str) -> dict[str, Any] | None:
    reader = auth(service.token("inventory:read", name="reader"))
    answer = service.client.get(f"/api/v1/assets/{asset_id}/vulnerabilities", headers=reader)
    assert answer.status_code == 200, answer.text
    (item,) = [i for i in answer.json()["items"] if i["cve"] == cve]
    assert item["status"] == "affected"  # the matcher's answer is never rewritten
    return item["analysis"]  # type: ignore[no-any-return]


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _audit(service: Service, action: str) -> list[dict[str, Any]]:
    admin = auth(service.token("admin", name="auditor"))
    answer = service.client.get("/api/v1/audit", params={"action": action}, headers=admin)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def _by_cve(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["cve"]: p for p in items}


def test_an_unloaded_vulnerable_library_is_proposed_with_its_window(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    first = utcnow().replace(microsecond=0) - timedelta(days=2)
    host = _push(post_report, report(first))
    items = _proposals(service, host)
    assert set(_by_cve(items)) == NVJPEG_CVES
    proposal = _by_cve(items)["CVE-2025-23272"]
    assert proposal["status"] == "proposed" and proposal["product"] == "nvjpeg"
    assert proposal["files"] == [{"path": NVJPEG, "sha256": OLD}]
    assert proposal["justification"] == JUSTIFICATION
    window = proposal["window"]
    assert (window["start"], window["end"], window["observations"]) == (
        _iso(first),
        _iso(first),
        1,
    )
    assert (window["processes_min"], window["processes_max"]) == (200, 200)
    assert proposal["expires"] == _iso(first + timedelta(days=30))
    assert not proposal["expired"] and proposal["analysis_id"] is None
    # a proposal decides nothing by itself: the finding has no analysis
    assert _analysis_of(service, host, "CVE-2025-23272") is None

    # the next --runtime report that still sees it unmapped widens the same proposal's window
    second = first + timedelta(days=1)
    assert _push(post_report, report(second, runtime=RuntimeScan("/proc", 250, 3))) == host
    again = _by_cve(_proposals(service, host))
    assert {p["id"] for p in again.values()} == {p["id"] for p in items}
    window = again["CVE-2025-23272"]["window"]
    assert (window["start"], window["end"], window["observations"]) == (
        _iso(first),
        _iso(second),
        2,
    )
    assert (window["processes_min"], window["processes_max"]) == (200, 250)
    assert again["CVE-2025-23272"]["expires"] == _iso(second + timedelta(days=30))
    # a report without --runtime observes nothing: the window stays
    _push(post_report, report(second + timedelta(hours=1), runtime=None))
    assert _by_cve(_proposals(service, host))["CVE-2025-23272"]["window"] == window
    one = again["CVE-2025-23272"]["id"]
    reader = auth(service.token("inventory:read", name="reader"))
    assert service.client.get(f"/api/v1/proposals/{one}", headers=reader).json()["window"] == (
        window
    )
    assert _proposals(service, host, status="withdrawn") == []


def test_no_proposal_when_loaded_unreadable_without_runtime_or_not_a_library(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    at = utcnow().replace(microsecond=0) - timedelta(hours=1)
    python = LoadedBy(4242, "/usr/bin/python3.11", sha256=OLD, via=LoadedVia.INODE)
    deleted = LoadedBy(4243, "/opt/app/run", deleted=True, sha256=OLD, via=LoadedVia.MAP_FILES)
    cases = {
        "loaded": report(at, loaders=(python,), machine="a", name="loaded"),
        "loaded-deleted": report(at, loaders=(deleted,), machine="b", name="deleted"),
        # one process's maps could not be read: "no process maps it" cannot be said
        "unreadable": report(
            at, runtime=RuntimeScan("/proc", 200, 0, (77,)), machine="c", name="unreadable"
        ),
        "unreadable-mapping": report(
            at, runtime=RuntimeScan("/proc", 200, 1, (), 1), machine="d", name="mapping"
        ),
        "no-runtime": report(at, runtime=None, machine="e", name="no-runtime"),
        "no-process": report(at, runtime=RuntimeScan("/proc", 0, 0), machine="f", name="empty"),
    }
    for case, body in cases.items():
        host = _push(post_report, body)
        assert _proposals(service, host) == [], case
    # the driver's CVEs: its kernel module runs whether a process maps libcuda or not
    host = _push(post_report, report(at, nvjpeg=False, driver=True, machine="g", name="drv"))
    reader = auth(service.token("inventory:read", name="reader"))
    found = service.client.get(f"/api/v1/assets/{host}/vulnerabilities", headers=reader).json()
    assert "CVE-2025-23280" in {i["cve"] for i in found["items"] if i["status"] == "affected"}
    assert _proposals(service, host) == []
    # nvJPEG beside it is proposed; the driver's CVEs still are not
    host = _push(post_report, report(at, driver=True, machine="h", name="both"))
    assert {p["cve"] for p in _proposals(service, host)} == NVJPEG_CVES


def test_accepting_records_the_callers_analysis_audited(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    first = utcnow().replace(microsecond=0) - timedelta(days=1)
    host = _push(post_report, report(first))
    proposals = _by_cve(_proposals(service, host))
    alice = auth(service.token("triage", name="alice"))
    pid = proposals["CVE-2025-23272"]["id"]
    answer = service.client.post(f"/api/v1/proposals/{pid}/accept", headers=alice)
    assert answer.status_code == 200, answer.text
    proposal, analysis = answer.json()["proposal"], answer.json()["analysis"]
    assert proposal["status"] == "accepted" and proposal["decided_by"] == "alice"
    assert proposal["analysis_id"] == analysis["id"]
    assert {k: analysis[k] for k in ("cve", "asset_id", "state", "justification", "author")} == {
        "cve": "CVE-2025-23272",
        "asset_id": host,
        "state": "not_affected",
        "justification": JUSTIFICATION,
        "author": "alice",
    }
    assert analysis["expires"] == proposal["expires"] == _iso(first + timedelta(days=30))
    assert analysis["source"] == f"runtime:proposal:{pid}"
    assert NVJPEG in analysis["detail"] and _iso(first) in analysis["detail"]
    assert "1 --runtime observation" in analysis["detail"]
    assert not analysis["trusted"]  # alice is not on GPUPROV_VEX_TRUSTED_AUTHORS here
    shown = _analysis_of(service, host, "CVE-2025-23272")
    assert shown is not None and shown["id"] == analysis["id"]
    (accepted,) = _audit(service, "proposal.accept")
    assert (accepted["actor"], accepted["target"]) == ("alice", f"proposal:{pid}")
    assert accepted["details"]["analysis_id"] == analysis["id"]
    (put,) = _audit(service, "analysis.put")
    assert put["actor"] == "alice" and put["details"]["author"] == "alice"
    # decided once: a second acceptance or a dismissal is a conflict, nothing stored
    again = service.client.post(f"/api/v1/proposals/{pid}/accept", headers=alice)
    assert again.status_code == 409 and "accepted, not proposed" in again.text
    assert service.client.post(f"/api/v1/proposals/{pid}/dismiss", headers=alice).status_code == (
        409
    )
    assert service.count("advisory_analysis") == 1

    # dismissing another, with a reason: audited, and not proposed again for the same files
    other = proposals["CVE-2025-23273"]["id"]
    url = f"/api/v1/proposals/{other}/dismiss"
    for refused, says in (
        ({"reason": "x" * 4097}, "at most 4096 characters"),
        ({"why": "batch job"}, "why"),
        ({"reason": 3}, "reason"),
    ):
        answer = service.client.post(url, json=refused, headers=alice)
        assert answer.status_code == 422 and says in answer.text, answer.text
    assert _by_cve(_proposals(service, host))["CVE-2025-23273"]["status"] == "proposed"
    why = "  the nightly batch job decodes JPEGs: it will load nvJPEG  "
    dismissed = service.client.post(url, json={"reason": why}, headers=alice)
    assert dismissed.status_code == 200, dismissed.text
    shown = dismissed.json()
    assert (shown["status"], shown["decided_by"], shown["reason"]) == (
        "dismissed",
        "alice",
        why.strip(),
    )
    (event,) = _audit(service, "proposal.dismiss")
    assert (event["actor"], event["target"]) == ("alice", f"proposal:{other}")
    assert event["details"]["reason"] == why.strip()
    _push(post_report, report(first + timedelta(hours=1)))
    after = _proposals(service, host)
    assert [p["status"] for p in after if p["cve"] == "CVE-2025-23273"] == ["dismissed"]
    assert len(after) == len(NVJPEG_CVES)
    # unknown ids are 404
    assert service.client.post("/api/v1/proposals/999999/accept", headers=alice).status_code == (
        404
    )


def test_a_report_showing_the_library_loaded_withdraws_it_and_its_analysis(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    first = utcnow().replace(microsecond=0) - timedelta(days=1)
    host = _push(post_report, report(first))
    proposals = _by_cve(_proposals(service, host))
    alice = auth(service.token("triage", name="alice"))
    pid = proposals["CVE-2025-23272"]["id"]
    accepted = service.client.post(f"/api/v1/proposals/{pid}/accept", headers=alice).json()
    analysis_id = accepted["analysis"]["id"]

    # a process maps the library, already deleted on disk (replaced by a package upgrade)
    loader = LoadedBy(5150, "/usr/bin/python3.11", deleted=True, sha256=OLD, via=LoadedVia.INODE)
    seen = first + timedelta(hours=2)
    _push(post_report, report(seen, loaders=(loader,)))
    after = _by_cve(_proposals(service, host))
    assert {p["status"] for p in after.values()} == {"withdrawn"}
    reason = after["CVE-2025-23272"]["reason"]
    assert reason.startswith(f"seen loaded: {NVJPEG} (sha256 {OLD}) is mapped by 1 process")
    assert "pid 5150" in reason and "deleted on disk" in reason and _iso(seen) in reason
    assert after["CVE-2025-23272"]["analysis_id"] == analysis_id
    # the analysis is expired (kept, listed): the finding is affected again
    assert _analysis_of(service, host, "CVE-2025-23272") is None
    reader = auth(service.token("inventory:read", name="reader"))
    stored = service.client.get(f"/api/v1/analyses/{analysis_id}", headers=reader).json()
    assert datetime.fromisoformat(stored["expires"]) <= utcnow()
    withdrawals = _audit(service, "proposal.withdraw")
    assert len(withdrawals) == len(NVJPEG_CVES)
    assert {(e["source"], e["actor"]) for e in withdrawals} == {("service", "gpuprov")}
    (mine,) = [e for e in withdrawals if e["target"] == f"proposal:{pid}"]
    assert mine["details"]["was"] == "accepted" and mine["details"]["reason"] == reason
    (expired,) = _audit(service, "analysis.expire")
    assert (expired["source"], expired["actor"]) == ("service", "gpuprov")
    assert expired["target"] == f"analysis:{analysis_id}"
    assert expired["details"]["reason"].startswith(f"runtime proposal {pid} withdrawn: seen")

    # unmapped again later: a new window, a new proposal
    later = seen + timedelta(hours=1)
    _push(post_report, report(later))
    fresh = _proposals(service, host, status="proposed")
    assert {p["cve"] for p in fresh} == NVJPEG_CVES
    assert {p["window"]["start"] for p in fresh} == {_iso(later)}


def test_changed_files_or_a_fixed_finding_withdraw_it(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    first = utcnow().replace(microsecond=0) - timedelta(days=1)
    host = _push(post_report, report(first))
    # other bytes at the path (a rebuild of the same version): the evidence was about others
    _push(post_report, report(first + timedelta(hours=1), runtime=None, sha=NEW))
    withdrawn = _proposals(service, host, status="withdrawn")
    assert {p["cve"] for p in withdrawn} == NVJPEG_CVES
    assert withdrawn[0]["reason"].startswith(f"the affected library files changed: {NVJPEG}")
    assert _proposals(service, host, status="proposed") == []  # no observation, no new one
    _push(post_report, report(first + timedelta(hours=2), sha=NEW))
    proposed = _proposals(service, host, status="proposed")
    assert {p["files"][0]["sha256"] for p in proposed} == {NEW}
    # nvJPEG gone: the CVEs are no longer open on the host
    _push(post_report, report(first + timedelta(hours=3), nvjpeg=False, runtime=None))
    assert _proposals(service, host, status="proposed") == []
    reasons = {p["reason"] for p in _proposals(service, host, status="withdrawn")}
    assert "CVE-2025-23272 is no longer an open finding of the host's latest scan" in reasons


def test_an_expired_proposal_cannot_be_accepted(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    old = utcnow().replace(microsecond=0) - timedelta(days=31)
    host = _push(post_report, report(old))
    (proposal, *_) = _proposals(service, host)
    assert proposal["expired"]
    triage = auth(service.token("triage", name="alice"))
    answer = service.client.post(f"/api/v1/proposals/{proposal['id']}/accept", headers=triage)
    assert answer.status_code == 409 and "a newer --runtime report" in answer.text
    assert service.count("advisory_analysis") == 0


def test_another_teams_caller_is_answered_404_and_a_viewer_403(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    host = _push(post_report, report(utcnow().replace(microsecond=0) - timedelta(hours=1)))
    admin = auth(service.token("admin", name="root"))
    for team in ("ml", "prod"):
        put = service.client.put(
            f"/api/v1/teams/{team}", json={"labels": {"team": team}}, headers=admin
        )
        assert put.status_code == 201, put.text
    labels = service.client.put(
        f"/api/v1/assets/{host}/labels", json={"labels": {"team": "ml"}}, headers=admin
    )
    assert labels.status_code == 200, labels.text
    pid = _proposals(service, host)[0]["id"]

    def team_token(team: str, *scopes: str) -> dict[str, str]:
        with service.db.transaction(write=True) as session:
            return auth(create_token(session, f"{team}-t", list(scopes), team=team).secret)

    outsider = team_token("prod", "inventory:read", "triage")
    for method, path in (
        ("GET", f"/api/v1/assets/{host}/proposals"),
        ("GET", f"/api/v1/proposals/{pid}"),
        ("POST", f"/api/v1/proposals/{pid}/accept"),
        ("POST", f"/api/v1/proposals/{pid}/dismiss"),
    ):
        answer = service.client.request(method, path, headers=outsider)
        assert answer.status_code == 404, (method, path, answer.text)
    viewer = auth(service.token("inventory:read", name="viewer"))
    for action in ("accept", "dismiss"):
        answer = service.client.post(f"/api/v1/proposals/{pid}/{action}", headers=viewer)
        assert answer.status_code == 403 and "triage" in answer.text
    insider = team_token("ml", "inventory:read", "triage")
    assert service.client.get(f"/api/v1/proposals/{pid}", headers=insider).status_code == 200
    answer = service.client.post(f"/api/v1/proposals/{pid}/accept", headers=insider)
    assert answer.status_code == 200, answer.text
    assert answer.json()["analysis"]["author"] == "ml-t"


def test_the_expiry_setting_is_bounded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert Settings(database_url=url, environment="test").runtime_proposal_days == 30
    for days in (0, 366):
        with pytest.raises(ValidationError, match="runtime_proposal_days"):
            Settings(database_url=url, environment="test", runtime_proposal_days=days)


def test_the_asset_page_lists_proposals_with_forms_for_triage_only(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    at = utcnow().replace(microsecond=0) - timedelta(hours=1)
    host = _push(post_report, report(at))
    pid = _by_cve(_proposals(service, host))["CVE-2025-23272"]["id"]
    reader = TestClient(service.client.app)
    assert login(reader, service.token("inventory:read", name="viewer")).status_code == 303
    page = reader.get(f"/assets/{host}")
    assert page.status_code == 200, page.text
    assert 'id="proposals"' in page.text and "Runtime proposals (4)" in page.text
    assert "libnvjpeg.so.12.3.1.117" in page.text and "1 observation" in page.text
    assert f'action="/proposals/{pid}/accept"' not in page.text  # no forms for a viewer
    csrf = csrf_of(page.text)  # the session's (logout form)
    refused = reader.post(f"/proposals/{pid}/accept", data={"csrf_token": csrf})
    assert refused.status_code == 403 and "triage" in refused.text

    analyst = TestClient(service.client.app)
    token = service.token("inventory:read", "triage", name="web-analyst")
    assert login(analyst, token).status_code == 303
    page = analyst.get(f"/assets/{host}")
    assert f'action="/proposals/{pid}/accept"' in page.text
    csrf = csrf_of(page.text)
    no_csrf = analyst.post(f"/proposals/{pid}/accept", data={"csrf_token": "x"})
    assert no_csrf.status_code == 403 and "CSRF" in no_csrf.text
    assert service.count("advisory_analysis") == 0
    done = analyst.post(
        f"/proposals/{pid}/accept", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert done.status_code == 303 and done.headers["location"] == f"/assets/{host}#proposals"
    shown = _analysis_of(service, host, "CVE-2025-23272")
    assert shown is not None and shown["author"] == "web-analyst"
    (event,) = _audit(service, "proposal.accept")
    assert (event["source"], event["actor"]) == ("web", "web-analyst")
    page = analyst.get(f"/assets/{host}")
    assert f'action="/proposals/{pid}/accept"' not in page.text and "by web-analyst" in page.text
    other = _by_cve(_proposals(service, host))["CVE-2025-23273"]["id"]
    assert 'name="reason" maxlength="4096"' in page.text
    dismissed = analyst.post(
        f"/proposals/{other}/dismiss",
        data={"csrf_token": csrf, "reason": "<b>kept</b> for the batch job"},
        follow_redirects=False,
    )
    assert dismissed.status_code == 303
    assert _by_cve(_proposals(service, host))["CVE-2025-23273"]["reason"] == (
        "<b>kept</b> for the batch job"
    )
    page = analyst.get(f"/assets/{host}")
    assert "&lt;b&gt;kept&lt;/b&gt; for the batch job" in page.text
    again = analyst.post(f"/proposals/{other}/dismiss", data={"csrf_token": csrf})
    assert again.status_code == 409 and "dismissed, not proposed" in again.text


def test_accepting_needs_the_finding_still_affected(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    host = _push(post_report, report(utcnow().replace(microsecond=0) - timedelta(hours=1)))
    pid = _by_cve(_proposals(service, host))["CVE-2025-23272"]["id"]
    # a feed revision that states a fix (the findings change with the import, the proposals at
    # the host's next report): the proposal no longer matches what the host is affected by
    with service.db.transaction(write=True) as session:
        session.execute(
            text("UPDATE advisory_finding SET status = 'fixed' WHERE cve = 'CVE-2025-23272'")
        )
    triage = auth(service.token("triage", name="alice"))
    answer = service.client.post(f"/api/v1/proposals/{pid}/accept", headers=triage)
    assert answer.status_code == 409, answer.text
    assert "no longer matches the host's latest scan" in answer.text
    assert service.count("advisory_analysis") == 0
    assert _proposals(service, host, status="accepted") == []


def _together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once (each in its thread, released by one barrier): their answers."""
    barrier = threading.Barrier(len(calls))
    answers: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        answers[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def test_concurrent_decisions_and_a_loaded_report_leave_one_outcome(
    service: Service, feed: None, post_report: Callable[..., Any]
) -> None:
    first = utcnow().replace(microsecond=0) - timedelta(hours=2)
    host = _push(post_report, report(first))
    proposals = _by_cve(_proposals(service, host))
    triage = auth(service.token("triage", name="alice"))
    # six people accept one proposal at once: one analysis, the others are told it is decided
    pid = proposals["CVE-2025-23272"]["id"]
    path = f"/api/v1/proposals/{pid}/accept"
    answers = _together(*[lambda: service.client.post(path, headers=triage)] * 6)
    assert sorted(a.status_code for a in answers) == [200] + [409] * 5
    assert service.count("advisory_analysis") == 1
    assert len(_audit(service, "proposal.accept")) == 1

    # an acceptance racing a report that shows the library loaded: whichever comes first, the
    # proposal ends withdrawn and no analysis of it stays in force
    other = proposals["CVE-2025-23273"]["id"]
    loader = LoadedBy(9, "/usr/bin/python3.11", sha256=OLD, via=LoadedVia.INODE)
    body = report(first + timedelta(hours=1), loaders=(loader,))
    writer = auth(service.token("report:write", name="agent"), **JSON_HEADERS)
    accepted, reported = _together(
        lambda: service.client.post(f"/api/v1/proposals/{other}/accept", headers=triage),
        lambda: service.client.post("/api/v1/reports", content=body, headers=writer),
    )
    assert reported.status_code == 201, reported.text
    assert accepted.status_code in (200, 409), accepted.text
    after = _by_cve(_proposals(service, host))
    assert {p["status"] for p in after.values()} == {"withdrawn"}
    assert _analysis_of(service, host, "CVE-2025-23273") is None
    assert _analysis_of(service, host, "CVE-2025-23272") is None
    if accepted.status_code == 200:
        assert after["CVE-2025-23273"]["analysis_id"] == accepted.json()["analysis"]["id"]
