"""The spool's edges (scanner/deliver.py): what an answer without a scan is, a spool entry whose
metadata cannot be read, legacy and missing files, the retry schedule at its bounds, and when a
flush goes on or stops. test_deliver.py covers the delivery paths; this file is narrow and fast
(mutation/modules.toml, spool)."""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from msgspec.structs import replace

from scanner.deliver import (
    Backoff,
    Client,
    Halt,
    ReportRejected,
    ServerError,
    Spool,
    SpoolEntry,
    Target,
    Unavailable,
    check_report,
    flush,
    push,
    send_with_backoff,
)
from scanner.errors import UsageError
from tests.scanner.test_deliver import REPORT, FakeService

T0 = 1_800_000_000.0


def _client(handler: object) -> Client:
    return Client(Target("http://svc", "gpv_token"), transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


def _answer(status: int, body: bytes) -> Client:
    return _client(lambda request: httpx.Response(status, content=body))


def reports(n: int) -> list[bytes]:
    return [REPORT.replace(b'"x"', f'"{i}"'.encode()) for i in range(n)]


def backoff(clock: float = T0, **kw: object) -> Backoff:
    return Backoff(1, sleep=lambda s: None, clock=lambda: clock, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [200, 201])
@pytest.mark.parametrize(
    "body",
    [
        b"<html>a proxy's page</html>",  # no JSON
        b"{}",  # no scan id
        b'{"scan_id": null, "asset_id": 1}',  # no number
        b'{"scan_id": "x", "asset_id": 1}',
    ],
)
def test_an_answer_without_a_scan_is_no_delivery(status: int, body: bytes) -> None:
    with pytest.raises(Unavailable, match=f"answered {status} without a scan"):
        _answer(status, body).send(REPORT)


def test_a_delivery_says_whether_it_was_new() -> None:
    body = b'{"scan_id": 3, "asset_id": 2, "asset_url": "/api/v1/assets/2"}'
    assert _answer(201, body).send(REPORT).created is True
    assert _answer(200, body).send(REPORT).created is False


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, ServerError), (501, ServerError), (599, ServerError), (499, ReportRejected)],
)
def test_which_answers_are_server_errors(status: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        _answer(status, b'{"error": {"message": "no"}}').send(REPORT)


@pytest.mark.parametrize(
    "meta",
    [
        None,  # no metadata file
        b"not json",
        b"[]",  # no object
        b'{"labels": 5}',
        b'{"labels": ["a"]}',
        b'{"failures": "many"}',
        b'{"retry_at": [1]}',
    ],
)
def test_a_spooled_report_with_unreadable_metadata_is_kept_plainly(
    tmp_path: Path, meta: bytes | None
) -> None:
    spool = Spool(tmp_path)
    entry = spool.add(REPORT, {"env": "prod"})
    if meta is None:
        entry.meta_path.unlink()
    else:
        entry.meta_path.write_bytes(meta)
    (read,) = spool.entries()
    assert (read.path, read.labels, read.failures, read.retry_at) == (entry.path, {}, 0, 0.0)
    assert read.read() == REPORT


def test_a_spool_is_made_with_its_parents_and_files_may_already_be_gone(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "a" / "b" / "spool")
    entry = spool.add(REPORT)
    assert spool.entries() == [entry]
    entry.meta_path.unlink()
    spool.remove(entry)  # its metadata already gone: still removed
    assert spool.entries() == []
    second = spool.add(REPORT)
    second.meta_path.unlink()
    moved = spool.reject(second, "refused")
    assert moved.is_file() and spool.entries() == []
    assert spool.rejected_entry(moved).reason == "refused"


def test_the_reason_of_a_report_set_aside_by_an_older_gpuprov(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    entry = spool.add(REPORT)
    moved = spool.reject(entry, "")
    SpoolEntry(moved, {}).meta_path.unlink(missing_ok=True)  # as an older gpuprov left it
    moved.with_name(moved.name + ".reason.txt").write_text("422: refused long ago\n")
    assert spool.rejected_entry(moved).reason == "422: refused long ago"


def test_the_default_schedule() -> None:
    schedule = Backoff(clock=lambda: T0)
    delays = list(schedule.delays())
    assert len(delays) == 2  # three tries
    assert 0.8 <= delays[0] <= 1.2 and 1.6 <= delays[1] <= 2.4
    # a report failing with server errors waits 1, 4, 16 minutes
    assert [schedule.next_retry(n) - T0 for n in (1, 2, 3)] == [60.0, 240.0, 960.0]
    assert schedule.server_error_limit == 5 and schedule.maximum == 60.0


def test_a_retry_after_of_exactly_the_longest_wait_is_waited_for() -> None:
    waits: list[float] = []
    calls = iter([Unavailable("busy", retry_after=60.0), Unavailable("busy", retry_after=60.5)])

    class Flaky:
        def send(self, report: bytes, labels: object) -> object:
            raise next(calls)

    with pytest.raises(Unavailable):
        send_with_backoff(Flaky(), REPORT, {}, Backoff(3, 1.0, 60.0, waits.append))  # type: ignore[arg-type]
    # 60 s is waited for (a push has that much patience); 60.5 s sends the report to the spool
    assert waits == [60.0]


def test_a_retry_after_ending_now_lets_the_flush_go_on(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.add(REPORT)
    spool.set_wait_until(T0)
    result = flush(spool, _client(FakeService()), backoff(T0))
    assert len(result.delivered) == 1 and result.halt is None
    spool.add(REPORT)
    spool.set_wait_until(T0 + 1)
    result = flush(spool, _client(FakeService()), backoff(T0))
    assert result.delivered == [] and result.halt is Halt.UNAVAILABLE


def test_a_refused_token_stops_the_flush_at_once(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for report in reports(3):
        spool.add(report)
    service = FakeService([401])
    result = flush(spool, _client(service), backoff())
    assert result.halt is Halt.UNAUTHORIZED and len(service.requests) == 1
    assert result.remaining == 3


def test_server_errors_stop_a_flush_only_two_in_a_row(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for report in reports(4):
        spool.add(report)
    # failing, delivered, failing, delivered: never two in a row
    service = FakeService([500, 201, 500, 201])
    result = flush(spool, _client(service), backoff())
    assert result.halt is None and len(result.delivered) == 2 and len(result.deferred) == 2
    spool = Spool(tmp_path / "other")
    for report in reports(4):
        spool.add(report)
    # delivered, then two failing in a row: the fourth is not tried
    service = FakeService([201, 500, 500])
    result = flush(spool, _client(service), backoff())
    assert result.halt is Halt.SERVER_ERRORS and len(service.requests) == 3


def test_a_report_past_the_server_error_limit_is_set_aside(tmp_path: Path) -> None:
    # failures recorded beyond the limit (a lower limit than the one that counted them)
    spool = Spool(tmp_path)
    entry = spool.add(REPORT)
    meta = json.loads(entry.meta_path.read_text())
    entry.meta_path.write_text(json.dumps({**meta, "failures": 7}))
    result = flush(spool, _client(FakeService([500])), backoff(server_error_limit=5))
    assert len(result.rejected) == 1 and spool.entries() == []
    assert "a server error 8 times" in result.rejected[0][1]
    entry = spool.add(REPORT)
    result = flush(spool, _client(FakeService([500])), backoff(server_error_limit=5))
    assert result.rejected == [] and spool.entries()[0].failures == 1


def test_a_pushed_report_is_compressed(tmp_path: Path) -> None:
    service = FakeService()
    push(REPORT, _client(service), Spool(tmp_path), backoff=backoff())
    assert gzip.decompress(service.requests[0].content) == REPORT


def test_a_report_spooled_by_an_earlier_gpuprov_is_not_spooled_again(tmp_path: Path) -> None:
    # the spool's file names are an on-disk format: the first 32 hex digits of the report's
    # SHA-256 after the time; an entry another version wrote is the same report
    spool = Spool(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    key = hashlib.sha256(REPORT).hexdigest()[:32]
    older = tmp_path / f"{1:020d}-{key}.cdx.json.gz"
    older.write_bytes(gzip.compress(REPORT))
    assert spool.add(REPORT).path == older
    assert [e.path for e in spool.entries()] == [older]


def test_set_aside_reports_are_private_and_requeued_without_their_metadata(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path)
    moved = spool.reject(spool.add(REPORT), "refused")
    assert oct(spool.rejected_dir.stat().st_mode & 0o777) == "0o700"
    SpoolEntry(moved, {}).meta_path.unlink()  # set aside by an older gpuprov, no metadata
    assert spool.requeue() == 1
    (entry,) = spool.entries()
    assert entry.read() == REPORT and spool.rejected() == []


def test_a_holder_that_wrote_no_pid_is_unknown(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.add(REPORT)
    (tmp_path / ".lock").write_text("")
    with open(tmp_path / ".lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = flush(spool, _client(FakeService()), backoff())
    assert result.busy == 0 and result.remaining == 1


def test_a_report_waiting_for_its_retry_time_does_not_hold_the_queue(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    first, second = reports(2)
    later = spool.add(first)
    spool.update(replace(later, failures=1, retry_at=T0 + 60, reason="500"))
    spool.add(second)
    service = FakeService()
    result = flush(spool, _client(service), backoff())
    assert [gzip.decompress(r.content) for r in service.requests] == [second]
    assert result.deferred == [(later.path, "500")] and result.remaining == 1


def test_a_push_waits_out_the_rest_of_a_retry_after(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.set_wait_until(T0 + 0.5)  # half a second still to wait: the report is spooled
    service = FakeService()
    outcome = push(REPORT, _client(service), spool, backoff=backoff(T0))
    assert outcome.spooled is not None and service.requests == []
    assert outcome.halt is Halt.UNAVAILABLE
    spool = Spool(tmp_path / "now")
    spool.set_wait_until(T0)  # ending now: sent
    outcome = push(REPORT, _client(service), spool, backoff=backoff(T0))
    assert outcome.delivered is not None and len(service.requests) == 1


def test_the_jitter_multiplies_each_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    from scanner import deliver

    for factor, waits in ((1.2, [1.2, 2.4, 4.8]), (0.8, [0.8, 1.6, 3.2])):
        monkeypatch.setattr(deliver.random, "uniform", lambda a, b, f=factor: f)
        assert [round(w, 6) for w in Backoff(4).delays()] == waits


def test_a_report_due_now_is_sent(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    entry = spool.add(REPORT)
    spool.update(replace(entry, failures=1, retry_at=T0, reason="500"))
    result = flush(spool, _client(FakeService()), backoff(T0))
    assert len(result.delivered) == 1 and result.deferred == []


def test_files_gone_before_their_removal_and_several_set_aside(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    first, second = (spool.add(r) for r in reports(2))
    first.path.unlink()  # delivered and removed by another flush meanwhile
    spool.remove(first)
    assert [e.path for e in spool.entries()] == [second.path]
    third = spool.add(reports(3)[2])
    spool.reject(second, "one")
    spool.reject(third, "two")  # the rejected directory exists by then
    assert sorted(e.reason for e in spool.rejected()) == ["one", "two"]


def test_a_spool_entry_is_a_value_that_cannot_be_changed(tmp_path: Path) -> None:
    """Entries are read from disk and replaced, never changed in place (a flush holds them)."""
    entry = Spool(tmp_path).add(REPORT)
    with pytest.raises(AttributeError):
        entry.failures = 3  # type: ignore[misc]


def test_a_retry_after_waited_out_leaves_no_file(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.add(REPORT)
    spool.set_wait_until(T0)
    assert (tmp_path / ".retry-after").is_file()
    flush(spool, _client(FakeService()), backoff(T0))
    assert not (tmp_path / ".retry-after").exists() and spool.wait_until() == 0.0


def test_an_application_sbom_is_refused_before_it_is_spooled() -> None:
    report = json.dumps(
        {
            "bomFormat": "CycloneDX",
            "specVersion": "1.6",
            "metadata": {"component": {"type": "application", "name": "gpuprov"}},
        }
    ).encode()
    with pytest.raises(UsageError, match="the BOM describes neither an image nor a host"):
        check_report(report)


def _no_gzip(compressed: bytes) -> bytes:
    return b"not gzip at all"


def _truncated(compressed: bytes) -> bytes:
    return compressed[: len(compressed) // 2]


def _garbled(compressed: bytes) -> bytes:
    return compressed[:10] + b"\xff" * 8 + compressed[18:]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_no_gzip, "Not a gzipped file"),
        (_truncated, "is no complete gzip file: Compressed file ended"),
        (_garbled, "is no complete gzip file: Error -3 while decompressing"),
    ],
)
def test_a_damaged_spool_file_is_set_aside_and_the_queue_goes_on(
    tmp_path: Path, damage: Callable[[bytes], bytes], why: str
) -> None:
    """A disk error or a hand edit: the report is set aside with the reason, never a traceback,
    and the reports after it are still sent."""
    spool = Spool(tmp_path)
    entry, _ = (spool.add(r) for r in reports(2))
    entry.path.write_bytes(damage(entry.path.read_bytes()))
    result = flush(spool, _client(FakeService()), backoff(T0))
    ((moved, reason),) = result.rejected
    assert reason.startswith("unreadable spool file: ") and why in reason
    assert spool.rejected_entry(moved).reason == reason
    assert len(result.delivered) == 1 and spool.entries() == []


@pytest.mark.parametrize("ended", [0.0, 0.5, 10.0])
def test_a_push_sends_when_a_retry_after_has_ended_while_another_flush_holds_the_spool(
    tmp_path: Path, ended: float
) -> None:
    """The other flush has not yet forgotten the Retry-After: ended now or before, it holds
    nothing."""
    spool = Spool(tmp_path)
    spool.set_wait_until(T0 - ended)
    service = FakeService()
    with open(tmp_path / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        outcome = push(REPORT, _client(service), spool, backoff=backoff(T0))
    assert outcome.flushed.busy is not None
    assert outcome.delivered is not None and outcome.spooled is None
    assert len(service.requests) == 1


def test_a_retry_after_in_the_past_is_forgotten(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.set_wait_until(T0)
    spool.set_wait_until(-1.0)
    assert not (tmp_path / ".retry-after").exists() and spool.wait_until() == 0.0


@pytest.mark.parametrize("fmt", ["Cyclone", "BOM", "CycloneDX ", "cyclonedx", "SPDX"])
def test_only_bomformat_cyclonedx_is_spooled_as_a_cyclonedx_bom(fmt: str) -> None:
    """Formats sorting before and after `CycloneDX`, and its name in other case, are refused."""
    report = json.dumps({"bomFormat": fmt, "specVersion": "1.6"}).encode()
    with pytest.raises(UsageError, match="neither a CycloneDX BOM"):
        check_report(report)
    with pytest.raises(UsageError, match="neither a CycloneDX BOM"):
        check_report(json.dumps([{"bomFormat": "CycloneDX"}]).encode())  # no object
