"""How uvicorn serves the app: `uvicorn_options` (no ``server`` header, log lines with a
timestamp and the logger's name, for uvicorn's loggers and the service's), and uvicorn's HTTP/1.1
protocol with TCP_NODELAY on every accepted connection.

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

from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol

#: the loggers of the service's own modules (``app.*``) and of its start-up (``gpuprov.*``)
SERVICE_LOGGERS = ("app", "gpuprov")


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
    """H11Protocol that disables Nagle's algorithm on its connection."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        set_nodelay(transport)
        super().connection_made(transport)  # type: ignore[arg-type]
