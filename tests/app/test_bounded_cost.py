"""Issue 17, section 2: what any caller may cost the service, on a live uvicorn over loopback.

Every body is read in one order, authorize, then an ingest slot where the body is large, then
the read: a request its caller may not make, or one that finds every slot taken, is answered
before its body is sent (a raw socket declares a large body and sends none of it). A body that
trickles in answers 408 and gives its slot back; one token holds at most its share of the slots,
so an asset-bound agent's push still gets through; a client leaving mid-body is a 499 in the
metrics and the log, never a 500 with a traceback. The request head is held to its documented
size and field count, a connection to its head and linger deadlines, and an asset to its label
cap. Each test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from fastapi import FastAPI
from typer.testing import CliRunner

from app.domain.tokens import authenticate
from app.http.body import IngestGate
from app.http.bodylimit import MAX_HEAD_BYTES, MAX_HEADERS
from app.http.dashboard.sessions import SESSION_COOKIE
from app.http.observe import served_routes
from app.http.server import NoDelayH11Protocol
from app.main import create_app
from app.settings import Settings
from scanner import cli_agent
from scanner.vocabulary import MAX_ASSET_LABELS
from tests.app import boms, catalogs
from tests.app.conftest import JSON_HEADERS, LiveServer, Service, auth, free_port
from tests.app.test_bad_input import NOTHING

#: how long a test waits for an answer the service owes at once (a generous bound on a loaded
#: machine; the answer comes in milliseconds)
ANSWER_WITHIN = 15
FORM = "application/x-www-form-urlencoded"
YAML = catalogs.YAML["Content-Type"]


@contextmanager
def live(service: Service, **settings: Any) -> Iterator[tuple[LiveServer, FastAPI]]:
    """uvicorn serving a fresh app on the service's (emptied) database, with `settings`."""
    app = create_app(service.settings.model_copy(update=settings))
    with LiveServer(service.settings, free_port(), app) as server:
        yield server, app


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN)


def send_head(sock: socket.socket, method: str, path: str, headers: dict[str, str]) -> None:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())


def answer_of(sock: socket.socket) -> tuple[int, str]:
    """The status and body of the answer on `sock` (socket.timeout when none comes)."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.read().decode()


def closed(sock: socket.socket) -> bool:
    """Whether the server closed the connection (reading what it still sends first)."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


class Trickler:
    """A client sending one byte of its body every `every` seconds, from a thread, until the
    server answers or closes; the answer is read on the calling thread (`answer`)."""

    def __init__(self, port: int, path: str, headers: dict[str, str], every: float):
        self.sock = connect(port)
        send_head(self.sock, "POST", path, headers)
        self.every = every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        while not self.stop.wait(self.every):
            try:
                self.sock.sendall(b" ")
            except OSError:
                return

    def answer(self) -> tuple[int, str]:
        try:
            return answer_of(self.sock)
        finally:
            self.stop.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.sock.close()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + ANSWER_WITHIN
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def token_id(service: Service, secret: str) -> str:
    """What the ingest slots count the token by."""
    with service.db.session() as session:
        return authenticate(session, secret).key


def session_cookie(server: LiveServer, secret: str) -> str:
    """A dashboard session cookie of `secret`, made by the login form."""
    with httpx.Client(base_url=server.url, timeout=ANSWER_WITHIN) as client:
        page = client.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert csrf is not None, page.text
        client.post("/login", data={"csrf_token": csrf.group(1), "token": secret, "next": "/"})
        return f"{SESSION_COOKIE}={client.cookies[SESSION_COOKIE]}"


# -- every body is read after authorization, and large ones in an ingest slot -----------------

#: the dashboard's admin forms (a concrete path for each route)
DASHBOARD_FORMS = (
    "/admin/policies",
    "/admin/trust-policy",
    "/admin/catalogs",
    "/admin/tokens",
    "/admin/tokens/1/revoke",
    "/admin/ci-trust",
    "/admin/ci-trust/prod/delete",
    "/admin/webhooks",
    "/admin/webhooks/prod/delete",
    "/admin/webhooks/prod/test",
    "/admin/teams",
    "/admin/teams/prod/delete",
    "/admin/teams/labels",
    "/admin/group-mappings",
    "/admin/group-mappings/prod/delete",
)
#: the dashboard's triage forms (the triage scope: a reader's session is refused)
TRIAGE_FORMS = (
    "/assets/1/analyses",
    "/advisories/CVE-2025-23280/analyses",
    "/analyses/1/withdraw",
    "/proposals/1/accept",
    "/proposals/1/dismiss",
)
JSON_MEDIA = {"Content-Type": "application/json"}
#: every operation that reads a body, by a concrete path
BODIES = (
    ("POST", "/api/v1/reports"),
    ("POST", "/api/v1/gate"),
    ("POST", "/api/v1/catalogs"),
    ("POST", "/api/v1/advisories"),
    ("POST", "/api/v1/analyses"),
    ("POST", "/api/v1/vex"),
    ("POST", "/api/v1/webhooks"),
    ("PUT", "/api/v1/teams/prod"),
    ("PUT", "/api/v1/assets/1/labels"),
    ("PUT", "/api/v1/policies/prod"),
    ("PUT", "/api/v1/trust-policy"),
    ("POST", "/api/v1/tokens"),
    ("PUT", "/api/v1/ci-trust/prod"),
    ("PUT", "/api/v1/group-mappings/prod"),
    ("POST", "/api/v1/proposals/1/dismiss"),
    ("POST", "/login"),
    ("POST", "/logout"),
    *(("POST", path) for path in DASHBOARD_FORMS),
    *(("POST", path) for path in TRIAGE_FORMS),
)
#: operations that take no body
NO_BODY = {
    ("POST", "/api/v1/tokens/{token_id}/rotate"),
    ("POST", "/api/v1/webhooks/{name}/rotate"),
    ("POST", "/api/v1/webhooks/{name}/test"),
    ("POST", "/api/v1/proposals/{proposal_id}/accept"),
}


def test_the_walk_below_covers_every_operation_that_takes_a_body(service: Service) -> None:
    """A new POST, PUT or PATCH route must join `BODIES` (and the walk) or `NO_BODY`."""
    app = service.client.app
    served = {
        (method, route.path)
        for route in served_routes(app.routes)  # type: ignore[attr-defined]
        for method in getattr(route, "methods", None) or ()
        if method in ("POST", "PUT", "PATCH")
    }
    templates = {(m, _templated(p)) for m, p in BODIES}
    assert served - NO_BODY == templates


def _templated(path: str) -> str:
    """A concrete path as its route's template."""
    path = re.sub(r"/assets/1(?=/|$)", "/assets/{asset_id}", path)
    path = re.sub(r"/analyses/1(?=/|$)", "/analyses/{analysis_id}", path)
    path = re.sub(r"/advisories/CVE-[0-9-]+(?=/|$)", "/advisories/{cve}", path)
    path = re.sub(r"/proposals/1(?=/|$)", "/proposals/{proposal_id}", path)
    return re.sub(r"/(prod|1)(?=/|$)", _template, path)


def _template(match: re.Match[str]) -> str:
    return "/{name}" if match.group(1) == "prod" else "/{token_id}"


def test_a_body_its_caller_may_not_send_is_refused_before_it_is_sent(service: Service) -> None:
    """Each request declares a large body and sends none of it: the answer must come anyway.
    (Before: the gate read a gate-only token's 40 MB before refusing it, the token request and
    the login form were read whole before anything else.)"""
    reader = service.token("inventory:read", name="reader")
    gate_only = service.token("gate", name="gate-only")
    writer = service.token("report:write", name="writer")
    big = str(40_000_000)
    cases: list[tuple[str, str, dict[str, str], int, str]] = [
        ("POST", "/api/v1/reports", {"Content-Type": JSON_HEADERS["Content-Type"]}, 401, ""),
        ("POST", "/api/v1/reports", auth(gate_only, **JSON_HEADERS), 403, "report:write"),
        ("POST", "/api/v1/gate", {"Content-Type": "application/json"}, 401, ""),
        ("POST", "/api/v1/gate", auth(writer, **{"Content-Type": "application/json"}), 403, ""),
        (
            "POST",
            "/api/v1/gate",
            auth(gate_only, **{"Content-Type": "application/json"}),
            413,
            "without report:write (an image digest only)",
        ),
        ("POST", "/api/v1/catalogs", auth(reader, **{"Content-Type": "application/json"}), 403, ""),
        ("POST", "/api/v1/advisories", auth(reader, **JSON_MEDIA), 403, "admin"),
        ("POST", "/api/v1/analyses", auth(reader, **JSON_MEDIA), 403, "triage"),
        ("POST", "/api/v1/vex", auth(reader, **JSON_MEDIA), 403, "triage"),
        ("POST", "/api/v1/webhooks", auth(reader, **JSON_MEDIA), 403, "admin"),
        ("PUT", "/api/v1/teams/prod", auth(reader, **JSON_MEDIA), 403, "admin"),
        ("PUT", "/api/v1/assets/1/labels", auth(reader, **JSON_MEDIA), 403, "admin"),
        (
            "PUT",
            "/api/v1/policies/prod",
            auth(reader, **{"Content-Type": YAML}),
            403,
            "policy:write",
        ),
        ("PUT", "/api/v1/trust-policy", auth(reader, **{"Content-Type": YAML}), 403, "admin"),
        ("POST", "/api/v1/tokens", auth(reader, **{"Content-Type": "application/json"}), 403, ""),
        (
            "PUT",
            "/api/v1/ci-trust/prod",
            auth(reader, **{"Content-Type": "application/json"}),
            403,
            "admin",
        ),
        ("PUT", "/api/v1/group-mappings/prod", auth(reader, **JSON_MEDIA), 403, "admin"),
        ("POST", "/api/v1/proposals/1/dismiss", auth(reader, **JSON_MEDIA), 403, "triage"),
        ("POST", "/login", {"Content-Type": FORM}, 413, "16384 bytes"),
        ("POST", "/logout", {"Content-Type": FORM}, 303, ""),
    ]
    for path in DASHBOARD_FORMS:  # no session: to the login form; a reader's: not an admin
        cases.append(("POST", path, {"Content-Type": FORM}, 303, ""))
        cases.append(("POST", path, {"Content-Type": FORM, "Cookie": ""}, 403, "admin"))
    for path in TRIAGE_FORMS:  # a reader's session: no triage
        cases.append(("POST", path, {"Content-Type": FORM}, 303, ""))
        cases.append(("POST", path, {"Content-Type": FORM, "Cookie": ""}, 403, "triage"))
    assert {(m, p) for m, p, *_ in cases} >= {(m, p) for m, p in BODIES}
    with live(service) as (server, _):
        reader_session = session_cookie(server, reader)
        for method, path, headers, status, fragment in cases:
            if headers.get("Cookie") == "":
                headers = {**headers, "Cookie": reader_session}
            size = (
                big
                if path.startswith(("/api/v1/reports", "/api/v1/gate", "/api/v1/cat"))
                else (str(20_000_000) if path == "/api/v1/advisories" else str(900_000))
            )
            with connect(server.port) as sock:
                send_head(sock, method, path, {**headers, "Content-Length": size})
                try:
                    got, text = answer_of(sock)
                except TimeoutError:
                    pytest.fail(f"{method} {path}: no answer before the body was sent")
                assert got == status, (method, path, text)
                assert fragment in text, (method, path, text)
    assert service.stored() == NOTHING


def test_every_slot_taken_is_answered_before_the_body(service: Service) -> None:
    writer = service.token("report:write", "gate", name="writer")
    admin = service.token("admin", name="admin")
    gate_only = service.token("gate", name="gate-only")
    with live(service, max_concurrent_ingests=2) as (server, app):
        gate: IngestGate = app.state.ingest_gate
        assert (
            gate.enter("token:-1") is None and gate.enter("token:-2") is None
        )  # others' reports in flight
        try:
            for path, secret in (
                ("/api/v1/reports", writer),
                ("/api/v1/gate", writer),
                ("/api/v1/catalogs", admin),
                ("/api/v1/advisories", admin),
            ):
                with connect(server.port) as sock:
                    media = JSON_HEADERS if path.endswith("reports") else {}
                    headers = {"Content-Type": "application/json", **media}
                    size = "20000000" if path.endswith("advisories") else "40000000"
                    send_head(
                        sock,
                        "POST",
                        path,
                        auth(secret, **headers, **{"Content-Length": size}),
                    )
                    status, text = answer_of(sock)
                    assert status == 503 and "GPUPROV_MAX_CONCURRENT_INGESTS" in text, text
            # gating an image digest takes no slot: a gate-only token is answered as usual
            answer = httpx.post(
                f"{server.url}/api/v1/gate",
                json={"policy": "prod", "image": "sha256:" + "a" * 64},
                headers=auth(gate_only),
                timeout=ANSWER_WITHIN,
            )
            assert answer.status_code == 404, answer.text
        finally:
            gate.leave("token:-1")
            gate.leave("token:-2")
    assert service.stored() == NOTHING


# -- a slow body loses its slot, and one token cannot hold them all ---------------------------


def test_a_trickling_body_answers_408_and_gives_its_slot_back(service: Service) -> None:
    writer = service.token("report:write", name="writer")
    writer_id = token_id(service, writer)
    with live(service, body_timeout_seconds=1, body_min_rate=100) as (server, app):
        gate: IngestGate = app.state.ingest_gate
        # five bytes a second against a minimum of 100: cut off about a second in
        headers = auth(writer, **JSON_HEADERS, **{"Content-Length": "10000000"})
        slow = Trickler(server.port, "/api/v1/reports", headers, every=0.2)
        try:
            wait_for(lambda: gate.held(writer_id) == 1, "the trickler's slot")
            status, text = slow.answer()
            assert status == 408, text
            assert "GPUPROV_BODY_MIN_RATE" in text
            wait_for(lambda: gate.held(writer_id) == 0, "the slot to be given back")
        finally:
            slow.close()
        # the slot is free again: a report sent at once is stored
        answer = httpx.post(
            f"{server.url}/api/v1/reports",
            content=boms.encode(boms.gpuprov_bom()),
            headers=auth(writer, **JSON_HEADERS),
            timeout=ANSWER_WITHIN,
        )
        assert answer.status_code == 201, answer.text


def test_one_token_holds_at_most_its_share_and_an_agent_gets_through(
    service: Service, tmp_path: Path
) -> None:
    """Before: eight trickling pushes of one token held every slot and every other push (an
    asset-bound agent's too) answered 503 for as long as they trickled."""
    greedy = service.token("report:write", name="greedy")
    greedy_id = token_id(service, greedy)
    agent_token = tmp_path / "agent.token"
    agent_token.write_text(service.token("report:write", assets=["gpu-node-*"], name="agent"))
    report = tmp_path / "report.json"
    report.write_bytes(boms.encode(boms.gpuprov_bom(kind="host", name="gpu-node-7")))
    # a minute allowed for a body: the tricklers are not cut off during the test
    with live(service, max_concurrent_ingests=4, body_timeout_seconds=60) as (server, app):
        gate: IngestGate = app.state.ingest_gate
        assert gate.per_token == 2  # half of the slots by default
        headers = auth(greedy, **JSON_HEADERS, **{"Content-Length": "10000000"})
        slow = [Trickler(server.port, "/api/v1/reports", headers, every=0.5) for _ in range(4)]
        try:
            wait_for(lambda: gate.held(greedy_id) == 2, "the greedy token's two slots")
            # the other two are refused at once, naming the share
            refused = [t for t in slow if _answered_within(t.sock, 2)]
            for trickler in refused:
                status, text = trickler.answer()
                assert status == 503 and "GPUPROV_MAX_CONCURRENT_INGESTS_PER_TOKEN" in text
            assert len(refused) == 2
            app_cli = typer.Typer()
            cli_agent.register(app_cli)
            pushed = CliRunner().invoke(
                app_cli,
                [
                    "push",
                    str(report),
                    "--server",
                    server.url,
                    "--token-file",
                    str(agent_token),
                    "--spool-dir",
                    str(tmp_path / "spool"),
                    "--retries",
                    "0",
                ],
            )
            assert pushed.exit_code == 0, pushed.output
            assert gate.held(greedy_id) == 2  # still trickling
        finally:
            for trickler in slow:
                trickler.close()
        wait_for(lambda: gate.held(greedy_id) == 0, "the tricklers' slots to be given back")
    assert service.count("scan") == 1


def _answered_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except TimeoutError:
        return False
    finally:
        sock.settimeout(ANSWER_WITHIN)


# -- a client leaving mid-body is its own event -----------------------------------------------


def test_a_client_leaving_mid_body_is_a_499_without_a_traceback(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    writer = service.token("report:write", name="writer")
    writer_id = token_id(service, writer)
    admin = service.token("admin", name="admin")
    caplog.set_level(logging.INFO)
    with live(service) as (server, app):
        gate: IngestGate = app.state.ingest_gate
        cases = (
            ("/login", {"Content-Type": FORM}),  # reachable without a token
            ("/api/v1/reports", auth(writer, **JSON_HEADERS)),
            ("/api/v1/tokens", auth(admin, **{"Content-Type": "application/json"})),
            ("/api/v1/gate", auth(admin, **{"Content-Type": "application/json"})),
        )
        for path, headers in cases:
            with connect(server.port) as sock:
                send_head(sock, "POST", path, {**headers, "Content-Length": "5000"})
                sock.sendall(b"token=abc&")
                time.sleep(0.2)  # the server reads what came, then waits for the rest
        metrics = app.state.metrics

        def counted(path: str, status: str) -> float:
            value = metrics.registry.get_sample_value(
                "gpuprov_http_request_duration_seconds_count",
                {"method": "POST", "route": path, "status": status},
            )
            return value or 0.0

        for path, _ in cases:
            wait_for(partial(lambda p: counted(p, "499") == 1, path), f"the 499 of {path}")
            assert counted(path, "500") == 0
        assert gate.held(writer_id) == 0
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]
    lines = [r.getMessage() for r in caplog.records if r.name == "app.access"]
    assert any(line.startswith("POST /login 499") for line in lines), lines


# -- the head, and the connection's own deadlines ---------------------------------------------


def test_the_head_is_held_to_its_documented_limits(service: Service) -> None:
    """Before: a 100 KB header arriving in one piece was accepted (h11 limits only a head still
    incomplete), and one push's query string attached 3,000 labels."""
    writer = service.token("report:write", name="writer")
    labels = "&".join(f"label=k{i}%3Dv" for i in range(3000))
    with live(service) as (server, _):
        report = auth(writer, **JSON_HEADERS, **{"Content-Length": "1000"})
        for headers, path, statuses in (
            # well under loopback's 64 KiB segment: arrives whole, refused by the app
            ({"X-Big": "a" * (MAX_HEAD_BYTES + 100)}, "/healthz", {431}),
            ({f"X-F{i}": "1" for i in range(MAX_HEADERS + 1)}, "/healthz", {431}),
            # larger: whole (the app, 431) or in pieces (h11, 400), refused either way
            ({"X-Big": "a" * 100_000}, "/healthz", {400, 431}),
            (report, f"/api/v1/reports?{labels}", {400, 431}),
        ):
            with connect(server.port) as sock:
                send_head(sock, "GET" if path == "/healthz" else "POST", path, headers)
                status, text = answer_of(sock)
                assert status in statuses, (path, status, text)
        # at the limits: served
        with connect(server.port) as sock:
            send_head(sock, "GET", "/healthz", {"X-Big": "a" * (MAX_HEAD_BYTES - 200)})
            assert answer_of(sock)[0] == 200
        with connect(server.port) as sock:
            send_head(sock, "GET", "/healthz", {f"X-F{i}": "1" for i in range(MAX_HEADERS - 1)})
            assert answer_of(sock)[0] == 200
        # a head still incomplete past the limit: uvicorn's h11 refuses it and closes
        with connect(server.port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MAX_HEAD_BYTES)
            status, _ = answer_of(sock)
            assert status == 400 and closed(sock)
    assert service.stored() == NOTHING


class QuickDeadlines(NoDelayH11Protocol):
    head_timeout = 0.5
    linger = 0.5


def test_a_connection_is_closed_past_its_head_and_linger_deadlines(service: Service) -> None:
    """Before: a connection sending nothing, or a head a byte at a time, or the rest of a body
    the service had refused, was held open for as long as the client liked."""
    writer = service.token("report:write", name="writer")
    with LiveServer(service.settings, free_port(), http=QuickDeadlines) as server:
        with connect(server.port) as sock:  # nothing sent at all
            assert closed(sock)
        with connect(server.port) as sock:  # a head that never ends, a byte at a time
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            for _ in range(5):
                time.sleep(0.2)
                try:
                    sock.sendall(b"X")
                except OSError:
                    break
            assert closed(sock)
        # refused (401) before its body: the rest may not trickle
        with connect(server.port) as sock:
            send_head(
                sock, "POST", "/api/v1/reports", {**JSON_HEADERS, "Content-Length": "1000000"}
            )
            assert answer_of(sock)[0] == 401
            for _ in range(5):
                time.sleep(0.2)
                try:
                    sock.sendall(b" ")
                except OSError:
                    break
            assert closed(sock)
        with connect(server.port) as sock:  # keep-alive is unchanged: two requests, one connection
            for _ in range(2):
                send_head(sock, "GET", "/healthz", {})
                assert answer_of(sock)[0] == 200
        # the rest of a refused body sent at once is read and dropped, and the connection
        # serves on: its next request may take longer than the linger
        with connect(server.port) as sock:
            send_head(sock, "POST", "/api/v1/reports", {**JSON_HEADERS, "Content-Length": "10"})
            assert answer_of(sock)[0] == 401
            body = boms.encode(boms.gpuprov_bom())
            headers = auth(writer, **JSON_HEADERS, **{"Content-Length": str(len(body))})
            head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            # the refused body's rest and the next request, in one piece
            request = f"POST /api/v1/reports HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode()
            sock.sendall(b"0123456789" + request + body[:100])
            time.sleep(1)
            sock.sendall(body[100:])
            assert answer_of(sock)[0] == 201


# -- labels per asset -------------------------------------------------------------------------


def test_labels_per_asset_are_capped(service: Service) -> None:
    writer = service.token("report:write", name="writer")
    app = create_app(service.settings.model_copy(update={"max_asset_labels": 3}))
    from fastapi.testclient import TestClient

    def post(bom: dict[str, Any], *labels: str) -> httpx.Response:
        with TestClient(app) as client:
            return client.post(
                "/api/v1/reports",
                content=boms.encode(bom),
                params={"label": list(labels)} if labels else None,
                headers=auth(writer, **JSON_HEADERS),
            )

    answer = post(boms.gpuprov_bom(), "a=1", "b=2", "c=3", "d=4")
    assert answer.status_code == 413
    assert "4 asset labels (label parameters)" in answer.json()["error"]["message"]
    assert "GPUPROV_MAX_ASSET_LABELS" in answer.json()["error"]["message"]
    four = {"a": "1", "b": "2", "c": "3", "d": "4"}
    answer = post(boms.gpuprov_bom(labels=four))
    assert answer.status_code == 413
    assert answer.json()["error"]["details"][0]["pointer"] == "/metadata/component/properties"
    answer = post(boms.gpuprov_bom(labels={"a": "1", "b": "2"}), "c=3", "d=4")
    assert answer.status_code == 413 and "together" in answer.json()["error"]["message"]
    assert service.stored() == NOTHING
    # three in all (a parameter overriding a report's label counts once): stored
    answer = post(boms.gpuprov_bom(labels={"a": "1", "b": "2"}), "b=20", "c=3")
    assert answer.status_code == 201, answer.text
    assert service.count("asset_label") == 3


def test_the_default_label_cap_is_the_clis(service: Service) -> None:
    assert Settings.model_fields["max_asset_labels"].default == MAX_ASSET_LABELS
    writer = service.token("report:write", name="writer")
    labels = [f"k{i}=v" for i in range(MAX_ASSET_LABELS + 1)]
    answer = service.client.post(
        "/api/v1/reports",
        content=boms.encode(boms.gpuprov_bom()),
        params={"label": labels},
        headers=auth(writer, **JSON_HEADERS),
    )
    assert answer.status_code == 413, answer.text
    assert service.stored() == NOTHING
