"""A real webhook receiver for tests: ``http.server`` in a thread on loopback, over HTTPS with a
private CA (its certificate names localhost, hooks.example.test, 127.0.0.1 and ::1), recording
each request and answering from a script of statuses (TLS and IPv6: more than the plain-HTTP
`tests.fixtures.loopback.LoopbackServer` serves; its quiet handler is shared)."""

from __future__ import annotations

import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from tests.fixtures.loopback import QuietHandler
from tests.fixtures.registry import _cert, _pem_cert, _pem_key

#: names the receiver's certificate is valid for
CERT_NAMES = ("localhost", "hooks.example.test")


@dataclass
class Received:
    """One request as the receiver read it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """The running receiver: its base URLs, its CA file, what it received, what it answers."""

    port: int
    ca_file: Path
    family: str
    received: list[Received] = field(default_factory=list)
    #: statuses answered in turn; the last repeats
    statuses: list[int] = field(default_factory=lambda: [200])
    #: extra headers of every answer
    answer_headers: dict[str, str] = field(default_factory=dict)
    #: the body of every answer (never shown back by the service)
    answer_body: bytes = b"ok"
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, host: str = "127.0.0.1", path: str = "/hook") -> str:
        shown = f"[{host}]" if ":" in host else host
        return f"https://{shown}:{self.port}{path}"

    def next_status(self) -> int:
        with self.lock:
            if len(self.statuses) > 1:
                return self.statuses.pop(0)
            return self.statuses[0]


def tls_files(directory: Path) -> tuple[Path, Path, Path]:
    """(CA, certificate, key) PEM files of a private CA and a server certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("gpuprov webhook test CA", ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in CERT_NAMES] + [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    cert = _cert("localhost", key, ("gpuprov webhook test CA", ca_key), sans=sans)
    paths = (directory / "ca.pem", directory / "server.pem", directory / "server.key")
    paths[0].write_bytes(_pem_cert(ca))
    paths[1].write_bytes(_pem_cert(cert))
    paths[2].write_bytes(_pem_key(key))
    return paths


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            with receiver.lock:
                receiver.received.append(
                    Received(
                        "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                    )
                )
            status = receiver.next_status()
            self.send_response(status)
            for name, value in receiver.answer_headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(receiver.answer_body)))
            self.end_headers()
            self.wfile.write(receiver.answer_body)

    return Handler


class _Server6(ThreadingHTTPServer):
    import socket as _socket

    address_family = _socket.AF_INET6


def run_receiver(directory: Path, family: str = "ipv4") -> Iterator[Receiver]:
    """Serve HTTPS on 127.0.0.1 (or ::1) until the generator is closed."""
    ca, cert, key = tls_files(directory)
    receiver = Receiver(0, ca, family)
    server_class = _Server6 if family == "ipv6" else ThreadingHTTPServer
    host = "::1" if family == "ipv6" else "127.0.0.1"
    server = server_class((host, 0), _handler(receiver))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    receiver.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
