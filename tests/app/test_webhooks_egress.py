"""The SSRF rules of webhook delivery (app/domain/egress.py, OWASP's cheat sheet): each class of
internal address refused, as a literal and behind a DNS name, IPv6 included; loopback allowed
only with GPUPROV_WEBHOOK_ALLOW_LOOPBACK and nothing else with it; plain http only to loopback;
the connection made to the address that was checked (a name that rebinds between two
deliveries is refused at the second); no redirects, no proxy, a bounded answer."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.domain.egress import (
    EgressPolicy,
    Refused,
    address_class,
    parse_target,
    post,
    resolve_checked,
    system_resolver,
)
from tests.app.webhook_receiver import Receiver, run_receiver

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("::1", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),
    ("fe80::1", "link-local"),
    ("100.64.0.1", "CGNAT (100.64.0.0/10)"),
    ("100.127.255.254", "CGNAT (100.64.0.0/10)"),
    ("fc00::1", "unique local (fc00::/7)"),
    ("fd12:3456::1", "unique local (fc00::/7)"),
    ("::ffff:127.0.0.1", "IPv4-mapped IPv6"),
    ("::ffff:8.8.8.8", "IPv4-mapped IPv6"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("64:ff9b::7f00:1", "NAT64 of a loopback address"),
    ("2002:7f00:1::", "IPv6 tunnel (6to4/Teredo)"),
    ("192.0.2.1", "private"),  # TEST-NET-1 (documentation)
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "93.184.215.14"]


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_each_internal_address_class_is_refused(address: str, kind: str) -> None:
    ip = ipaddress.ip_address(address)
    assert address_class(ip) == kind
    shown = f"[{address}]" if ":" in address else address
    with pytest.raises(Refused, match="address"):
        parse_target(f"https://{shown}/hook", EgressPolicy())


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert address_class(ipaddress.ip_address(address)) is None
    shown = f"[{address}]" if ":" in address else address
    assert parse_target(f"https://{shown}/hook", EgressPolicy()).literal == ipaddress.ip_address(
        address
    )


@pytest.mark.parametrize(("address", "kind"), REFUSED)
def test_a_name_resolving_to_an_internal_address_is_refused(address: str, kind: str) -> None:
    target = parse_target("https://hooks.example.test/hook", EgressPolicy())
    with pytest.raises(Refused, match=f"resolves to {ipaddress.ip_address(address)}, a "):
        resolve_checked(target, EgressPolicy(), lambda host, port: [address])
    # one internal answer among public ones refuses the lot (the order is the resolver's)
    with pytest.raises(Refused):
        resolve_checked(target, EgressPolicy(), lambda host, port: ["8.8.8.8", address])


def test_localhost_by_the_system_resolver_is_refused_without_the_flag() -> None:
    target = parse_target("https://localhost:8443/hook", EgressPolicy())
    with pytest.raises(Refused, match=r"localhost resolves to (127\.0\.0\.1|::1), a loopback"):
        resolve_checked(target, EgressPolicy(), system_resolver)
    allowed = EgressPolicy(allow_loopback=True)
    assert resolve_checked(target, allowed, system_resolver).is_loopback


def test_the_loopback_flag_allows_loopback_and_nothing_else() -> None:
    allowed = EgressPolicy(allow_loopback=True)
    assert parse_target("https://127.0.0.1/x", allowed).literal is not None
    assert parse_target("https://[::1]/x", allowed).literal is not None
    for address, kind in REFUSED:
        if kind == "loopback":
            continue
        shown = f"[{address}]" if ":" in address else address
        with pytest.raises(Refused):
            parse_target(f"https://{shown}/x", allowed)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://example.com/hook", "must be https"),
        ("ftp://example.com/hook", "must be https"),
        ("file:///etc/passwd", "must be https"),
        ("https://user:pw@example.com/hook", "credentials"),
        ("https://example.com/hook#x", "fragment"),
        ("https:///hook", "no host"),
        ("https://example.com:99999/hook", "not a valid URL"),
        ("http://127.0.0.1/hook", "loopback address"),  # plain http needs the flag too
    ],
)
def test_urls_refused_before_any_resolution(url: str, message: str) -> None:
    with pytest.raises(Refused, match=message):
        parse_target(url, EgressPolicy())


def test_plain_http_only_to_loopback_with_the_flag() -> None:
    allowed = EgressPolicy(allow_loopback=True)
    assert parse_target("http://127.0.0.1:9/x", allowed).scheme == "http"
    assert parse_target("http://localhost:9/x", allowed).scheme == "http"
    with pytest.raises(Refused, match="must be https"):
        parse_target("http://hooks.example.test/x", allowed)
    with pytest.raises(Refused, match="must be https"):
        parse_target("http://8.8.8.8/x", allowed)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    yield from run_receiver(tmp_path / "tls")


def _policy(receiver: Receiver, **kw: object) -> EgressPolicy:
    return EgressPolicy(allow_loopback=True, ca_file=receiver.ca_file, **kw)  # type: ignore[arg-type]


def test_the_connection_goes_to_the_checked_address_with_tls_for_the_name(
    receiver: Receiver,
) -> None:
    # a name no DNS knows, resolved (once) by the injected resolver: the connection is made to
    # that address, and TLS verifies the certificate for the name in the URL
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    url = receiver.url("hooks.example.test")
    answer = post(url, b"{}", {"content-type": "application/json"}, _policy(receiver), resolver)
    assert (answer.status, answer.error, answer.address) == (200, None, "127.0.0.1")
    assert calls == ["hooks.example.test"]
    assert receiver.received[0].headers["host"] == f"hooks.example.test:{receiver.port}"


def test_dns_rebinding_between_deliveries_is_refused(receiver: Receiver) -> None:
    answers = iter([["127.0.0.1"], ["10.0.0.5"]])
    url = receiver.url("hooks.example.test")
    policy = _policy(receiver)
    assert post(url, b"{}", {}, policy, lambda h, p: next(answers)).status == 200
    with pytest.raises(Refused, match=r"resolves to 10\.0\.0\.5, a private address"):
        post(url, b"{}", {}, policy, lambda h, p: next(answers))
    assert len(receiver.received) == 1


def test_a_certificate_for_another_name_fails(receiver: Receiver) -> None:
    answer = post(
        receiver.url("other.example.test"),
        b"{}",
        {},
        _policy(receiver),
        lambda h, p: ["127.0.0.1"],
    )
    assert answer.status is None and answer.error is not None
    assert "certificate" in answer.error.lower()
    assert receiver.received == []


def test_redirects_are_not_followed_and_the_body_is_never_read_past_the_cap(
    receiver: Receiver,
) -> None:
    receiver.statuses = [302]
    receiver.answer_headers = {"location": "https://169.254.169.254/latest/meta-data/"}
    answer = post(receiver.url(), b"{}", {}, _policy(receiver))
    assert answer.status == 302
    assert len(receiver.received) == 1  # nothing followed the Location
    receiver.statuses = [200]
    receiver.answer_body = b"x" * 1_000_000
    answer = post(receiver.url(), b"{}", {}, _policy(receiver, max_response_bytes=1024))
    assert answer.status == 200


def test_proxy_variables_are_ignored(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    # a proxy nobody listens on: had it been used, the request would fail
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert post(receiver.url(), b"{}", {}, _policy(receiver)).status == 200


def test_ipv6_loopback_receiver(tmp_path: Path) -> None:
    gen = run_receiver(tmp_path / "tls6", family="ipv6")
    receiver = next(gen)
    try:
        assert post(receiver.url("::1"), b"{}", {}, _policy(receiver)).status == 200
        with pytest.raises(Refused, match="loopback"):
            post(receiver.url("::1"), b"{}", {}, EgressPolicy(ca_file=receiver.ca_file))
    finally:
        gen.close()


def test_timeouts_are_bounded(tmp_path: Path) -> None:
    import socket
    import time

    # a listener that never answers: the read timeout ends the attempt
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        start = time.monotonic()
        answer = post(
            f"https://127.0.0.1:{port}/x",
            b"{}",
            {},
            EgressPolicy(allow_loopback=True, connect_timeout=0.5, read_timeout=0.5),
        )
        assert time.monotonic() - start < 10
    assert answer.status is None and answer.error is not None
    assert "within" in answer.error
