"""`gpuprov serve` turns Nagle's algorithm off on each accepted connection (see app/http/server.py)
and believes proxy headers only from the configured proxies; tests/app/test_cli.py runs the
command itself with two workers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from app.http.server import set_nodelay, uvicorn_options
from app.settings import Settings
from app.storage.migrate import upgrade
from tests.app.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


class _Transport:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default


def test_accepted_connections_get_tcp_nodelay() -> None:
    # a listening socket made as `uvicorn --workers N` makes it: protocol number 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()):
            accepted, _ = listener.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
                set_nodelay(_Transport(accepted))  # type: ignore[arg-type]
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


# ------------------------------------------------------------------ proxy headers


def _serve(db: str, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    environment = {
        **os.environ,
        "GPUPROV_DATABASE_URL": db,
        "GPUPROV_AUTH_FAILURE_LIMIT": "3",
        **{f"GPUPROV_{k.upper()}": v for k, v in env.items()},
    }
    command = [sys.executable, "-m", "gpuprov", "serve", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--log-level", "warning"], cwd=ROOT, env=environment, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return process, url
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(process.communicate()[1].decode()[-2000:]) from None
            time.sleep(0.1)


def _failures(url: str) -> list[int]:
    """Five requests with unknown tokens, each claiming another client address."""
    return [
        httpx.get(
            f"{url}/api/v1/assets",
            headers={"Authorization": "Bearer gpv_nope", "X-Forwarded-For": f"198.51.100.{i}"},
            timeout=10,
        ).status_code
        for i in range(5)
    ]


@pytest.fixture
def migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'gpuprov.db'}"
    upgrade(url)
    return url


def test_a_local_peer_cannot_choose_its_address_by_default(migrated: str) -> None:
    process, url = _serve(migrated)
    try:
        # the peer is the client: the fourth failure is over the limit, whatever it claims
        assert _failures(url) == [401, 401, 401, 429, 429]
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_a_configured_proxy_is_believed(migrated: str) -> None:
    process, url = _serve(migrated, forwarded_allow_ips="127.0.0.1")
    try:
        # each forwarded address is a client of its own: none reaches the limit
        assert _failures(url) == [401] * 5
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_uvicorn_trusts_no_proxy_unless_configured() -> None:
    assert uvicorn_options()["proxy_headers"] is False
    options = uvicorn_options("text", "10.0.0.0/8,192.0.2.7")
    assert (
        options["proxy_headers"] is True
        and options["forwarded_allow_ips"] == "10.0.0.0/8,192.0.2.7"
    )


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("*", "every client"), ("proxy.local", "not an IP address"), ("10.0.0.0/33", "not an IP")],
)
def test_bad_proxy_settings_are_refused(value: str, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        Settings(forwarded_allow_ips=value)


@pytest.mark.parametrize("value", ["ftp://x", "https://", "https://h/?q=1", "https://u:p@h"])
def test_bad_public_urls_are_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="GPUPROV_PUBLIC_URL"):
        Settings(public_url=value)
