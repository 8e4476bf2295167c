"""How uvicorn serves the app: `uvicorn_options` (no ``server`` header, log lines with a
timestamp and the logger's name, for uvicorn's loggers and the service's, h11's head limit), and
uvicorn's HTTP/1.1 protocol with TCP_NODELAY on every accepted connection and deadlines on a
request's head and on the unread rest of a body answered early.

With ``--workers N`` uvicorn binds its listening socket with protocol number 0, and CPython only
sets TCP_NODELAY on sockets whose protocol is IPPROTO_TCP, so each answer written in two pieces
waited for the client's delayed ACK: ~40 ms added to every request. Setting the option on the
accepted socket removes that stall whatever the worker count.
"""

from __future__ import annotations

import asyncio
import copy
import socket
from typing import Any

import h11
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.http.bodylimit import MAX_HEAD_BYTES

#: the loggers of the service's own modules (``app.*``) and of its start-up (``gpuprov.*``)
SERVICE_LOGGERS = ("app", "gpuprov")
#: seconds a request's line and headers may take, from its first byte (Apache's mod_reqtimeout
#: allows 20-40 s, nginx's client_header_timeout 60 s)
HEAD_TIMEOUT_SECONDS = 20.0
#: seconds the rest of a body the service answered without reading may take to arrive (nginx's
#: lingering_time is 30 s): the answer is sent, the bytes are read and dropped, then it closes
LINGER_SECONDS = 10.0


def log_config(log_format: str = "text") -> dict[str, Any]:
    """uvicorn's logging configuration with timestamps, extended to the service's loggers;
    ``json``: every line one JSON object (`app.logs.JsonFormatter`) with the request id."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["default"]["fmt"] = "%(asctime)s %(levelprefix)s %(name)s: %(message)s"
    config["formatters"]["access"]["fmt"] = (
        '%(asctime)s %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
    )
    if log_format == "json":
        for formatter in config["formatters"].values():
            formatter.clear()
            formatter["()"] = "app.logs.JsonFormatter"
    for name in SERVICE_LOGGERS:
        config["loggers"][name] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


def uvicorn_options(log_format: str = "text", forwarded_allow_ips: str = "") -> dict[str, Any]:
    """Keyword arguments of `uvicorn.run` / `uvicorn.Config` for the service. uvicorn's access
    log is off: the service writes its own line per request (``app.access``), which carries the
    request id and names the route without the query string.

    ``X-Forwarded-For``/``-Proto`` are believed only from ``forwarded_allow_ips`` (the
    proxies' addresses): uvicorn's own default trusts 127.0.0.1, which let any local process
    pick its client address and so escape the failed-authentication limit."""
    return {
        "http": NoDelayH11Protocol,
        # h11 refuses a head still incomplete past this (400); the app one complete past it
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        "server_header": False,
        "log_config": log_config(log_format),
        "access_log": False,
        "proxy_headers": bool(forwarded_allow_ips),
        "forwarded_allow_ips": forwarded_allow_ips or None,
    }


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Disable Nagle's algorithm on a TCP transport's socket."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with Nagle's algorithm off, and two deadlines uvicorn does
    not keep: a request's head must arrive within `HEAD_TIMEOUT_SECONDS` of its first byte (or
    of the connection's opening), and the rest of a body the service answered without reading
    (401, 413, 408, ...) within `LINGER_SECONDS` of the answer; past either, the connection is
    closed. Without them a client sending a byte now and then held its connection forever."""

    head_timeout: float = HEAD_TIMEOUT_SECONDS
    linger: float = LINGER_SECONDS
    _timer: asyncio.TimerHandle | None = None
    _timer_kind: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        set_nodelay(transport)
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm("head", self.head_timeout)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._timer_kind == "linger" and not self._unread_body():
            self._cancel()  # the rest of the refused body came (and was dropped)
        if self.conn.their_state is h11.IDLE:  # the first bytes of a request, or none yet
            if self._timer_kind != "head":
                self._arm("head", self.head_timeout)
        elif self._timer_kind == "head":  # the head is in: the app's body deadline follows
            self._cancel()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._unread_body() and not self.transport.is_closing():
            self._arm("linger", self.linger)

    def _unread_body(self) -> bool:
        """Whether the client is still sending the body of a request already answered."""
        return self.conn.our_state is h11.DONE and self.conn.their_state is h11.SEND_BODY

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _arm(self, kind: str, seconds: float) -> None:
        self._cancel()
        self._timer = self.loop.call_later(seconds, self._expired)
        self._timer_kind = kind

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_kind = None

    def _expired(self) -> None:
        self._timer = self._timer_kind = None
        if not self.transport.is_closing():
            self.transport.close()
