"""The limit on failed authentication per client: after `limit` requests with an unknown,
revoked or expired token within `window` seconds, a client's requests answer 429 with
``Retry-After`` (its token is not even looked at) until the oldest failure leaves the window.
A request without a token is not a failure: it guesses nothing.

In-process: each worker process counts its own failures, so with N workers a client is refused
after at most N × `limit` failures in a window. The client is the connection's peer address;
behind a proxy, have uvicorn take the client address from ``X-Forwarded-For``
(``FORWARDED_ALLOW_IPS``) or every client shares the proxy's budget.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque


class AuthFailureLimiter:
    """Sliding-window counts of authentication failures per client, in bounded memory."""

    #: clients tracked at once; the least recently failing one is forgotten beyond it
    MAX_CLIENTS = 10_000

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, client: str, now: float | None = None) -> int | None:
        """Seconds until `client` may try again, or None when it is not blocked."""
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._failures.get(client)
            if times is None:
                return None
            self._expire(times, now)
            if not times:
                del self._failures[client]
                return None
            if len(times) < self.limit:
                return None
            return max(1, math.ceil(times[0] + self.window - now))

    def fail(self, client: str, now: float | None = None) -> None:
        """Count one failed authentication of `client`."""
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._failures.pop(client, None) or deque()
            self._expire(times, now)
            times.append(now)
            while len(times) > self.limit:  # only the last `limit` matter
                times.popleft()
            self._failures[client] = times
            while len(self._failures) > self.MAX_CLIENTS:
                self._failures.popitem(last=False)

    def reset(self) -> None:
        """Forget every failure."""
        with self._lock:
            self._failures.clear()

    def _expire(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window:
            times.popleft()
