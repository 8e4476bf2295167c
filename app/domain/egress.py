"""Outbound HTTP to URLs people configure (webhook endpoints), under the rules of OWASP's
Server-Side Request Forgery Prevention Cheat Sheet: HTTPS only; the name resolved and every
address checked on every request, and the connection made to the address that was checked (a
DNS answer that changes between the check and the connection, "DNS rebinding", cannot steer
it); internal addresses refused; no redirects, no proxy from the environment, bounded time and
bounded answer. What comes back is a status, never the receiver's body.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: (host, port) -> the addresses the name resolves to, as text
Resolver = Callable[[str, int], Sequence[str]]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_ULA = ipaddress.ip_network("fc00::/7")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(Exception):
    """A destination the rules refuse; the message names the rule."""


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """How outbound requests are made."""

    #: loopback addresses (and plain HTTP to them) allowed: GPUPROV_WEBHOOK_ALLOW_LOOPBACK,
    #: for tests; every other internal address stays refused
    allow_loopback: bool = False
    connect_timeout: float = 5.0
    #: seconds for each read and write (Standard Webhooks suggests 15-30 s for an answer)
    read_timeout: float = 15.0
    #: bytes of an answer read at most (it is discarded: only the status counts)
    max_response_bytes: int = 64 * 1024
    #: CA bundle trusted for HTTPS receivers (None: the system's default bundle)
    ca_file: Path | None = None


@dataclass(frozen=True, slots=True)
class Target:
    """A URL that passed the static checks."""

    scheme: str
    host: str
    port: int
    #: path and query, as sent
    path: str
    #: the Host header
    authority: str
    #: the host is an IP address literal
    literal: IPAddress | None


@dataclass(frozen=True, slots=True)
class Answer:
    """What a request came to: the receiver's status, or why there was none."""

    status: int | None
    error: str | None
    #: seconds the receiver asked to wait (Retry-After on 429 and 503)
    retry_after: float | None = None
    #: the address connected to
    address: str | None = None


def address_class(ip: IPAddress) -> str | None:
    """The class of a non-public address ("loopback", "private", ...); None for a public one."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            # ::ffff:127.0.0.1 reaches 127.0.0.1: refused whatever it maps
            return "IPv4-mapped IPv6"
        if ip in _NAT64:
            inner = address_class(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
            if inner is not None:
                return f"NAT64 of a {inner} address"
        if ip.sixtofour is not None or ip.teredo is not None:
            return "IPv6 tunnel (6to4/Teredo)"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"  # 169.254.169.254: the cloud metadata service
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "CGNAT (100.64.0.0/10)"
    if isinstance(ip, ipaddress.IPv6Address) and ip in _ULA:
        return "unique local (fc00::/7)"
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "not globally routable"
    return None


def _allowed(ip: IPAddress, policy: EgressPolicy) -> str | None:
    """Why ``ip`` is refused under ``policy``; None when it may be connected to."""
    kind = address_class(ip)
    if kind == "loopback" and policy.allow_loopback:
        return None
    return kind


def parse_target(url: str, policy: EgressPolicy) -> Target:
    """Check a URL without resolving it: HTTPS (plain HTTP only to a loopback address with
    loopback allowed), a host, no credentials or fragment; an address literal is checked now."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise Refused(f"not a valid URL: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise Refused("the URL must be https://")
    host = parts.hostname or ""
    if not host:
        raise Refused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise Refused("the URL must not carry credentials (user:password@)")
    if parts.fragment:
        raise Refused("the URL must not carry a fragment (#...)")
    literal: IPAddress | None
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        why = _allowed(literal, policy)
        if why is not None:
            raise Refused(f"{host} is a {why} address")
    if scheme == "http":
        loopback_name = host == "localhost" or (literal is not None and literal.is_loopback)
        if not (policy.allow_loopback and loopback_name):
            raise Refused(
                "the URL must be https:// (plain http only to a loopback address, with "
                "GPUPROV_WEBHOOK_ALLOW_LOOPBACK=1, for tests)"
            )
    port = port if port is not None else (443 if scheme == "https" else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    default = (scheme, port) in (("https", 443), ("http", 80))
    shown = f"[{host}]" if isinstance(literal, ipaddress.IPv6Address) else host
    authority = shown if default else f"{shown}:{port}"
    return Target(scheme, host, port, path, authority, literal)


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to now (every family), in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def resolve_checked(target: Target, policy: EgressPolicy, resolver: Resolver) -> IPAddress:
    """The address to connect to: every address the host resolves to must pass (one internal
    answer among public ones refuses the lot: the resolver's order is the attacker's)."""
    if target.literal is not None:
        return target.literal
    try:
        answers = resolver(target.host, target.port)
    except (OSError, UnicodeError) as e:
        raise Refused(f"{target.host} does not resolve: {e}") from None
    addresses: list[IPAddress] = []
    for text in answers:
        try:
            addresses.append(ipaddress.ip_address(text.split("%", 1)[0]))
        except ValueError:
            raise Refused(f"{target.host} resolves to {text!r}, not an address") from None
    if not addresses:
        raise Refused(f"{target.host} resolves to no address")
    for ip in addresses:
        why = _allowed(ip, policy)
        if why is not None:
            raise Refused(f"{target.host} resolves to {ip}, a {why} address")
        if target.scheme == "http" and not ip.is_loopback:
            raise Refused(f"plain http is allowed to loopback only; {target.host} resolves to {ip}")
    return addresses[0]


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date: the backoff decides
    return seconds if 0 <= seconds <= 86_400 else None


def _ssl_context(policy: EgressPolicy) -> ssl.SSLContext:
    if policy.ca_file is not None:
        return ssl.create_default_context(cafile=str(policy.ca_file))
    return ssl.create_default_context()


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    policy: EgressPolicy,
    resolver: Resolver = system_resolver,
) -> Answer:
    """POST ``body`` to ``url`` under ``policy``; never raises for the network or the receiver
    (the answer says what happened), only `Refused` for a destination the rules refuse."""
    target = parse_target(url, policy)
    ip = resolve_checked(target, policy, resolver)
    # connect to the checked address; TLS still verifies the certificate for the host named
    # in the URL (sni_hostname), and the Host header names it too
    shown = f"[{ip}]" if isinstance(ip, ipaddress.IPv6Address) else str(ip)
    connect_url = f"{target.scheme}://{shown}:{target.port}{target.path}"
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    timeout = httpx.Timeout(policy.read_timeout, connect=policy.connect_timeout)
    try:
        with (
            httpx.Client(
                verify=_ssl_context(policy),
                trust_env=False,  # HTTPS_PROXY and friends would route around the checks
                follow_redirects=False,
                timeout=timeout,
            ) as client,
            client.stream(
                "POST",
                connect_url,
                content=body,
                headers={**headers, "Host": target.authority},
                extensions=extensions,
            ) as response,
        ):
            read = 0
            for chunk in response.iter_raw():
                read += len(chunk)
                if read >= policy.max_response_bytes:
                    break  # the body is never used: stop reading past the cap
            status = response.status_code
            wait = (
                _retry_after(response.headers.get("retry-after")) if status in (429, 503) else None
            )
            return Answer(status, None, wait, str(ip))
    except httpx.ConnectTimeout:
        return Answer(None, f"no connection within {policy.connect_timeout:g} s", None, str(ip))
    except httpx.TimeoutException:
        return Answer(None, f"no answer within {policy.read_timeout:g} s", None, str(ip))
    except httpx.HTTPError as e:
        # the library's own words (connection refused, certificate verify failed); never data
        # the receiver sent
        reason = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        return Answer(None, f"{type(e).__name__}: {reason}", None, str(ip))
