"""Agent-side delivery: spooling, backoff, exactly-once flushing, refusals set aside.

The service is stood in for by httpx's MockTransport, and by a real HTTP server on loopback that
answers programmed statuses (`ProgrammedService`); tests/app/test_faults.py runs the same paths
against the real service.
"""

from __future__ import annotations

import email.utils
import errno
import gzip
import hashlib
import http.server
import json
import os
import threading
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from scanner import cli_agent
from scanner import deliver as deliver_module
from scanner.deliver import (
    Backoff,
    Client,
    Halt,
    ReportRejected,
    Spool,
    Target,
    default_spool_dir,
    flush,
    labels_from,
    push,
    retry_after,
)
from scanner.errors import UsageError
from scanner.vocabulary import MAX_ASSET_LABELS

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
    with pytest.raises(ReportRejected, match=r"\(422\): said 422"):
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


def test_two_reports_whose_digests_share_a_long_prefix_are_two_entries(tmp_path: Path) -> None:
    # The same bytes are spooled once, keyed by their digest: two different reports must never
    # share a key. These two (found by a birthday search) share the first 40 bits of their
    # SHA-256, so a key of up to 10 hex digits would silently merge them and lose one.
    first, second = (
        json.dumps(
            {"bomFormat": "CycloneDX", "specVersion": "1.6", "serialNumber": f"urn:uuid:{n}"}
        ).encode()
        for n in (1743334, 3028384)
    )
    digests = [hashlib.sha256(r).hexdigest() for r in (first, second)]
    assert digests[0][:10] == digests[1][:10] and digests[0] != digests[1]
    spool = Spool(tmp_path)
    spool.add(first)
    spool.add(second)
    assert sorted(e.read() for e in spool.entries()) == sorted([first, second])
    service = FakeService()
    assert len(flush(spool, _client(service), Backoff(1)).delivered) == 2
    assert set(service.stored) == {first, second}


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
    spool.add(REPORT, {"env": "prod"})
    spool.add(REPORT + b" ")
    result = flush(spool, _client(FakeService([422])), Backoff(1))
    assert len(result.rejected) == 1 and len(result.delivered) == 1
    moved, reason = result.rejected[0]
    assert moved.parent.name == "rejected" and "said 422" in reason
    [dead] = spool.rejected()
    assert dead.path == moved and "said 422" in dead.reason and dead.labels == {"env": "prod"}
    assert spool.entries() == []
    # put back once fixed: delivered with its labels
    assert spool.requeue() == 1 and spool.rejected() == []
    service = FakeService()
    assert len(flush(spool, _client(service), Backoff(1)).delivered) == 1
    assert service.requests[0].url.params.get_list("label") == ["env=prod"]


def test_flush_skips_when_another_process_holds_the_spool(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.add(REPORT)
    with spool.lock() as holder:
        assert holder is None
        result = flush(Spool(tmp_path), _client(FakeService()), Backoff(1))
    assert result.busy == os.getpid() and result.remaining == 1 and not result.delivered


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
    most = [f"k{i}=v" for i in range(MAX_ASSET_LABELS)]
    assert len(labels_from([*most, "k0=again"])) == MAX_ASSET_LABELS  # a key given twice
    with pytest.raises(UsageError, match=f"at most {MAX_ASSET_LABELS}"):
        labels_from([*most, "one=more"])


def test_backoff_doubles_and_caps() -> None:
    delays = list(Backoff(6, 1.0, 4.0).delays())
    assert len(delays) == 5
    assert 0.8 <= delays[0] <= 1.2 and 1.6 <= delays[1] <= 2.4
    assert all(d <= 4.8 for d in delays[2:])


class ProgrammedService:
    """A real HTTP server on loopback standing in for the service: each POST gets the next
    programmed answer (a status, or a status with headers), then 201; a report in `poison`
    always gets a 500, as a report that breaks the service would. Reports are stored by
    content, so a report delivered twice is stored once."""

    def __init__(
        self, script: list[int | tuple[int, dict[str, str]]] | None = None, poison: bytes = b""
    ) -> None:
        self.script = list(script or [])
        self.poison = poison
        self.received: list[tuple[bytes, list[str]]] = []
        self.stored: list[bytes] = []
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = gzip.decompress(self.rfile.read(int(self.headers["Content-Length"])))
                labels = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                service.received.append((body, labels.get("label", [])))
                status, headers = service._answer(body)
                if status < 400:
                    created = body not in service.stored
                    if created:
                        service.stored.append(body)
                    scan = service.stored.index(body) + 1
                    payload = {"scan_id": scan, "asset_id": 1, "asset_url": "/api/v1/assets/1"}
                else:
                    payload = {"error": {"status": status, "message": f"said {status}"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _answer(self, body: bytes) -> tuple[int, dict[str, str]]:
        if self.poison and body == self.poison:
            return 500, {}
        if self.script:
            step = self.script.pop(0)
            return step if isinstance(step, tuple) else (step, {})
        return 201, {}

    def client(self) -> Client:
        return Client(Target(self.url, "gpv_token", timeout=5))

    def __enter__(self) -> ProgrammedService:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _reports(n: int) -> list[bytes]:
    return [REPORT.replace(b'"x"', f'"r{i}"'.encode()) for i in range(n)]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _backoff(clock: Clock | None = None, **kw: float) -> Backoff:
    """One try per report and no real waits; server errors retried by later flushes."""
    options: dict[str, Any] = {"attempts": 1, "sleep": _no_wait([]), **kw}
    return Backoff(**options, clock=clock or Clock())


def test_a_report_the_service_fails_on_does_not_block_the_queue(tmp_path: Path) -> None:
    """The issue's stuck agent: the oldest report gets a 500 every time. The reports behind it
    are delivered at once; it is retried by later flushes, spaced out, then set aside."""
    poison, *good = _reports(3)
    spool = Spool(tmp_path / "spool")
    for report in (poison, *good):
        spool.add(report, {"env": "prod"})
    clock = Clock()
    backoff = _backoff(clock, server_error_limit=3, server_error_delay=60)
    with ProgrammedService(poison=poison) as service:
        first = flush(spool, service.client(), backoff)
        assert [d.created for d in first.delivered] == [True, True]
        assert service.stored == good and first.remaining == 1 and first.halt is None
        assert [reason for _, reason in first.deferred] == ["the service answered 500: said 500"]
        # too early for a retry: the service is not called
        asked = len(service.received)
        assert flush(spool, service.client(), backoff).remaining == 1
        assert len(service.received) == asked
        clock.now += 61
        second = flush(spool, service.client(), backoff)
        assert second.remaining == 1 and not second.rejected and len(service.received) == asked + 1
        clock.now += 60 * 4 + 1  # the second wait is four times the first
        third = flush(spool, service.client(), backoff)
    assert third.remaining == 0 and len(third.rejected) == 1
    [dead] = spool.rejected()
    assert dead.path == third.rejected[0][0] and dead.labels == {"env": "prod"}
    assert "500" in dead.reason and "3 times" in dead.reason
    assert gzip.decompress(dead.path.read_bytes()) == poison
    assert spool.entries() == []


def test_a_service_failing_on_everything_stops_the_flush(tmp_path: Path) -> None:
    """Two 500s in a row are the service's fault, not the reports': stop, set nothing aside."""
    spool = Spool(tmp_path)
    for report in _reports(5):
        spool.add(report)
    with ProgrammedService([500] * 10) as service:
        result = flush(spool, service.client(), _backoff())
    assert len(service.received) == 2 and result.halt is Halt.SERVER_ERRORS
    assert result.remaining == 5 and not result.rejected and not result.delivered


@pytest.mark.parametrize("status", [400, 403, 404, 413, 415, 422])
def test_a_refused_report_is_set_aside_at_once_and_the_queue_goes_on(
    tmp_path: Path, status: int
) -> None:
    first, second = _reports(2)
    spool = Spool(tmp_path)
    spool.add(first)
    spool.add(second)
    with ProgrammedService([status]) as service:
        result = flush(spool, service.client(), _backoff())
    assert service.stored == [second] and result.remaining == 0
    [dead] = spool.rejected()
    assert f"({status}): said {status}" in dead.reason
    assert gzip.decompress(dead.path.read_bytes()) == first


@pytest.mark.parametrize("status", [408, 429, 502, 503, 504])
def test_transient_answers_keep_every_report_in_order(tmp_path: Path, status: int) -> None:
    spool = Spool(tmp_path)
    reports = _reports(3)
    for report in reports:
        spool.add(report)
    waits: list[float] = []
    backoff = _backoff(attempts=3, sleep=_no_wait(waits))  # type: ignore[arg-type]
    with ProgrammedService([status] * 3) as service:
        result = flush(spool, service.client(), backoff)
        assert result.halt is Halt.UNAVAILABLE and f"answered {status}" in (result.error or "")
        assert len(waits) == 2 and result.remaining == 3 and not spool.rejected()
        assert [body for body, _ in service.received] == [reports[0]] * 3
        later = flush(spool, service.client(), backoff)  # back up: all delivered, in order
    assert len(later.delivered) == 3 and service.stored == reports


def test_unreachable_service_keeps_the_queue(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.add(REPORT)
    with ProgrammedService() as service:
        url = service.url
    result = flush(spool, Client(Target(url, "gpv_token", timeout=2)), _backoff())
    assert result.halt is Halt.UNAVAILABLE and "cannot reach" in (result.error or "")
    assert result.remaining == 1 and not spool.rejected()


def test_a_refused_token_stops_and_keeps_everything(tmp_path: Path) -> None:
    """401: no report is at fault; nothing is set aside, a new report joins the queue."""
    spool = Spool(tmp_path)
    old, new = _reports(2)
    spool.add(old)
    with ProgrammedService([401]) as service:
        outcome = push(new, service.client(), spool, {"env": "prod"}, _backoff())
        assert len(service.received) == 1  # the flush stopped at the first 401
        assert outcome.halt is Halt.UNAUTHORIZED and outcome.spooled is not None
        assert "refused the agent's token (401)" in (outcome.error or "")
        assert len(spool.entries()) == 2 and not spool.rejected()
        fixed = flush(spool, service.client(), _backoff())  # the token is fixed
    assert service.stored == [old, new] and fixed.remaining == 0


def test_retry_after_is_honoured_by_later_pushes(tmp_path: Path) -> None:
    """A Retry-After longer than a push may wait: spooled at once, and no push calls the
    service before that time."""
    spool = Spool(tmp_path)
    clock = Clock()
    waits: list[float] = []
    backoff = _backoff(clock, attempts=3, sleep=_no_wait(waits))  # type: ignore[arg-type]
    first, second = _reports(2)
    with ProgrammedService([(503, {"Retry-After": "600"})]) as service:
        outcome = push(first, service.client(), spool, None, backoff)
        assert outcome.spooled is not None and waits == [] and len(service.received) == 1
        clock.now += 300
        again = push(second, service.client(), spool, None, backoff)
        assert again.spooled is not None and "Retry-After" in (again.error or "")
        assert len(service.received) == 1 and len(spool.entries()) == 2
        clock.now += 301
        later = flush(spool, service.client(), backoff)
    assert len(later.delivered) == 2 and service.stored == [first, second]


def test_short_retry_after_is_waited_for(tmp_path: Path) -> None:
    waits: list[float] = []
    backoff = _backoff(attempts=2, initial=1.0, sleep=_no_wait(waits))  # type: ignore[arg-type]
    with ProgrammedService([(429, {"Retry-After": "7"})]) as service:
        outcome = push(REPORT, service.client(), Spool(tmp_path), None, backoff)
    assert outcome.delivered is not None and waits == [7.0]


def test_retry_after_forms() -> None:
    now = 1_700_000_000.0
    assert retry_after("120") == 120.0
    assert retry_after(" 5 ") == 5.0
    date = email.utils.formatdate(now + 90, usegmt=True)
    assert retry_after(date, lambda: now) == 90.0
    assert retry_after(email.utils.formatdate(now - 90, usegmt=True), lambda: now) == 0.0
    assert retry_after("99999999") == 3600.0  # capped
    assert retry_after("soon") is None and retry_after(None) is None and retry_after("-1") is None


def test_a_utf16_report_is_refused_before_it_is_sent_or_spooled(tmp_path: Path) -> None:
    """The service refuses JSON that is not UTF-8; the agent must not spool such a report."""
    spool = Spool(tmp_path)
    for encoding in ("utf-16", "utf-32"):
        with pytest.raises(UsageError, match="not UTF-8"):
            push(REPORT.decode().encode(encoding), _client(FakeService()), spool)
    assert spool.entries() == []


def test_a_report_the_service_would_refuse_as_json_is_not_spooled(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    twice = REPORT.replace(b'"bomFormat"', b'"specVersion": "1.4", "bomFormat"', 1)
    with pytest.raises(UsageError, match="duplicate key 'specVersion'"):
        push(twice, _client(FakeService()), spool)
    assert spool.entries() == []


def test_retry_after_holds_a_push_even_with_an_empty_spool(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    clock = Clock()
    spool.set_wait_until(clock.now + 100)
    with ProgrammedService() as service:
        outcome = push(REPORT, service.client(), spool, None, _backoff(clock))
        assert outcome.spooled is not None and outcome.halt is Halt.UNAVAILABLE
        assert service.received == []
        clock.now += 101
        assert len(flush(spool, service.client(), _backoff(clock)).delivered) == 1


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG])
def test_a_full_spool_refuses_the_newest_report_and_keeps_the_oldest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """tests/faults/test_spool_full.py fills a real tmpfs; here the write fails as it would."""
    spool = Spool(tmp_path / "spool")
    down = FakeService([httpx.ConnectError("refused")] * 10)
    old = _reports(3)
    for report in old[:2]:
        assert push(report, _client(down), spool, {}, _backoff()).spooled is not None
    real_write = deliver_module.atomic_write

    def full(path: Path, data: bytes, **kw: Any) -> None:
        if path.name.endswith(".cdx.json.gz"):  # the labels file fits, the report does not
            raise OSError(code, os.strerror(code))
        real_write(path, data, **kw)

    monkeypatch.setattr(deliver_module, "atomic_write", full)
    outcome = push(old[2], _client(down), spool, {"env": "prod"}, _backoff())
    assert outcome.delivered is None and outcome.spooled is None
    assert outcome.not_kept is not None and outcome.not_kept.full and outcome.not_kept.kept == 2
    assert "is full" in str(outcome.not_kept) and "NOT kept" in str(outcome.not_kept)
    assert outcome.error is not None and "refused" in outcome.error
    assert [e.read() for e in spool.entries()] == old[:2]
    assert len(list(spool.directory.glob("*.meta.json"))) == 2  # no orphan labels file
    monkeypatch.setattr(deliver_module, "atomic_write", real_write)
    up = FakeService()
    assert push(old[2], _client(up), spool, {}, _backoff()).delivered is not None
    assert list(up.stored) == [old[0], old[1], old[2]]  # oldest first


def test_agent_exit_code_when_the_spool_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def full(*_: Any, **__: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(deliver_module, "atomic_write", full)
    code = cli_agent._push_once(
        _client(FakeService([httpx.ConnectError("refused")])),
        Spool(tmp_path / "spool"),
        REPORT,
        {},
        _backoff(),
    )
    assert code == cli_agent.EXIT_NOT_KEPT == 4
    err = capsys.readouterr().err
    assert "and not spooled: the spool" in err and "No space left on device" in err
