"""`gpuprov serve` turns Nagle's algorithm off on each accepted connection (see app/http/server.py);
tests/app/test_cli.py runs the command itself with two workers."""

from __future__ import annotations

import socket
from typing import Any

from app.http.server import set_nodelay


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
