"""Agent-side delivery: spooling, backoff, exactly-once flushing, refusals set aside.

The service is stood in for by httpx's MockTransport here; tests/app/test_faults.py runs the
same paths against the real service.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from scanner.deliver import (
    Backoff,
    Client,
    Rejected,
    Spool,
    Target,
    default_spool_dir,
    flush,
    labels_from,
    push,
)
from scanner.errors import UsageError

REPORT = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "serialNumber": "x"}).encode()


class FakeService:
    """Answers with a scripted list of statuses (then 201), storing reports by content."""

    def __init__(self, statuses: list[int | Exception] | None = None) -> None:
        self.script = list(statuses or [])
        self.stored: dict[bytes, int] = {}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.script:
            outcome = self.script.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            if outcome >= 400:
                body = {"error": {"status": outcome, "message": f"said {outcome}", "details": []}}
                return httpx.Response(outcome, json=body, headers={"Retry-After": "5"})
        report = gzip.decompress(request.content)
        created = report not in self.stored
        self.stored.setdefault(report, len(self.stored) + 1)
        body = {"scan_id": self.stored[report], "asset_id": 1, "asset_url": "/api/v1/assets/1"}
        return httpx.Response(201 if created else 200, json={**body, "created": created})


def _client(service: FakeService) -> Client:
    return Client(Target("http://svc", "gpv_token"), transport=httpx.MockTransport(service))


def _no_wait(waits: list[float]) -> Callable[[float], None]:
    return waits.append


def test_push_sends_gzip_with_token_and_labels(tmp_path: Path) -> None:
    service = FakeService()
    outcome = push(REPORT, _client(service), Spool(tmp_path), {"env": "prod", "team": "ml"})
    assert outcome.delivered is not None and outcome.delivered.created
    request = service.requests[0]
    assert request.headers["authorization"] == "Bearer gpv_token"
    assert request.headers["content-encoding"] == "gzip"
    assert request.headers["content-type"] == "application/vnd.cyclonedx+json"
    assert request.url.params.get_list("label") == ["env=prod", "team=ml"]
    assert gzip.decompress(request.content) == REPORT


@pytest.mark.parametrize(
    "failure", [503, 500, 429, httpx.ConnectError("refused"), httpx.ReadTimeout("slow")]
)
def test_unavailable_service_spools(tmp_path: Path, failure: int | Exception) -> None:
    service = FakeService([failure] * 3)
    waits: list[float] = []
    spool = Spool(tmp_path / "spool")
    outcome = push(
        REPORT, _client(service), spool, {"env": "prod"}, Backoff(3, 1.0, 60, _no_wait(waits))
    )
    assert outcome.delivered is None and outcome.spooled is not None
    assert len(waits) == 2
    if isinstance(failure, int):  # Retry-After: 5 is honoured
        assert all(w >= 5 for w in waits)
    entries = spool.entries()
    assert [e.labels for e in entries] == [{"env": "prod"}]
    assert entries[0].read() == REPORT
    assert oct(entries[0].path.stat().st_mode & 0o777) == "0o600"
    assert oct(spool.directory.stat().st_mode & 0o777) == "0o700"


def test_retry_succeeds_without_spooling(tmp_path: Path) -> None:
    service = FakeService([503])
    waits: list[float] = []
    outcome = push(
        REPORT, _client(service), Spool(tmp_path), None, Backoff(3, 0.5, 60, _no_wait(waits))
    )
    assert outcome.delivered is not None and len(waits) == 1 and not Spool(tmp_path).entries()


def test_refusal_raises_and_is_not_spooled(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    with pytest.raises(Rejected, match=r"\(422\): said 422"):
        push(REPORT, _client(FakeService([422])), spool)
    assert spool.entries() == []


def test_not_a_report_is_a_usage_error(tmp_path: Path) -> None:
    for data in (b"{nope", b'{"spdxVersion": "2.3"}'):
        with pytest.raises(UsageError):
            push(data, _client(FakeService()), Spool(tmp_path))


def test_flush_delivers_oldest_first_exactly_once(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    reports = [REPORT.replace(b'"x"', f'"{i}"'.encode()) for i in range(3)]
    for report in reports:
        spool.add(report, {"n": "1"})
    spool.add(reports[0])  # spooled twice: kept once
    assert len(spool.entries()) == 3
    service = FakeService()
    result = flush(spool, _client(service), Backoff(1))
    assert [gzip.decompress(r.content) for r in service.requests] == reports
    assert len(result.delivered) == 3 and result.remaining == 0 and spool.entries() == []
    # delivering the same reports again (a lost answer) creates nothing new
    for report in reports:
        spool.add(report)
    again = flush(spool, _client(service), Backoff(1))
    assert [d.created for d in again.delivered] == [False, False, False]
    assert len(service.stored) == 3


def test_flush_stops_while_the_service_is_down(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for i in range(3):
        spool.add(REPORT + b" " * i)
    service = FakeService([201, 503, 503])
    result = flush(spool, _client(service), Backoff(2, 0.01, 0.01, _no_wait([])))
    assert len(result.delivered) == 1 and result.remaining == 2 and "503" in (result.error or "")
    assert len(spool.entries()) == 2


def test_flush_sets_refused_reports_aside(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.add(REPORT)
    spool.add(REPORT + b" ")
    result = flush(spool, _client(FakeService([403])), Backoff(1))
    assert len(result.rejected) == 1 and len(result.delivered) == 1
    moved, reason = result.rejected[0]
    assert moved.parent.name == "rejected" and "said 403" in reason
    assert "said 403" in moved.with_name(moved.name + ".reason.txt").read_text()
    assert spool.entries() == []


def test_flush_skips_when_another_process_holds_the_spool(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.add(REPORT)
    with spool.lock() as held:
        assert held
        result = flush(Spool(tmp_path), _client(FakeService()), Backoff(1))
    assert result.busy and result.remaining == 1 and not result.delivered


def test_target_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPROV_SERVER", raising=False)
    monkeypatch.delenv("GPUPROV_TOKEN", raising=False)
    with pytest.raises(UsageError, match="GPUPROV_SERVER"):
        Target.resolve()
    with pytest.raises(UsageError, match="GPUPROV_TOKEN"):
        Target.resolve("http://svc:8000/")
    with pytest.raises(UsageError, match="http"):
        Target.resolve("svc:8000", None)
    token_file = tmp_path / "token"
    token_file.write_text("gpv_abc\n")
    assert Target.resolve("http://svc:8000/", token_file) == Target("http://svc:8000", "gpv_abc")
    monkeypatch.setenv("GPUPROV_SERVER", "https://gpuprov.example")
    monkeypatch.setenv("GPUPROV_TOKEN", "gpv_env")
    assert Target.resolve() == Target("https://gpuprov.example", "gpv_env")
    with pytest.raises(UsageError, match="cannot read"):
        Target.resolve(None, tmp_path / "missing")


def test_spool_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUPROV_SPOOL", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_spool_dir() == tmp_path / ".local/share/gpuprov/spool"
    monkeypatch.setenv("GPUPROV_SPOOL", "/var/spool/gpuprov")
    assert default_spool_dir() == Path("/var/spool/gpuprov")


def test_labels() -> None:
    assert labels_from(["env=prod", "team = ml "]) == {"env": "prod", "team": "ml"}
    with pytest.raises(UsageError):
        labels_from(["env"])


def test_backoff_doubles_and_caps() -> None:
    delays = list(Backoff(6, 1.0, 4.0).delays())
    assert len(delays) == 5
    assert 0.8 <= delays[0] <= 1.2 and 1.6 <= delays[1] <= 2.4
    assert all(d <= 4.8 for d in delays[2:])
