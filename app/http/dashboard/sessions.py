"""Dashboard sessions: a stateless cookie ``payload.signature`` (base64url JSON, HMAC-SHA256 with
``GPUPROV_SECRET_KEY``) naming the token that logged in, bound to that token's stored hash, with
its expiry and the session's CSRF token.

Nothing secret is in the cookie: the token's secret never leaves the login form, and the binding
is an HMAC of the token's hash, so a cookie for a token revoked (or replaced under the same id)
is refused. The CSRF token is random per session and compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

from scanner.loaders import load_json

SESSION_COOKIE = "gpuprov_session"
#: a signed-in person's session: a random id naming a server-side row (app.domain.users)
PERSON_COOKIE = "gpuprov_user"
#: the browser that started a sign-in at the provider (its callback must come back to it)
SSO_LOGIN_COOKIE = "gpuprov_sso"
#: the login form's CSRF cookie (before a session exists): double-submit, signed
LOGIN_COOKIE = "gpuprov_login"
#: longest cookie value accepted; anything longer was not written by us
_MAX_COOKIE = 1024


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class SessionData:
    """What a valid session cookie says."""

    token_id: int
    binding: str
    issued_at: int
    expires_at: int
    csrf: str


class Signer:
    """Signs and checks the dashboard's cookies with one key."""

    def __init__(self, key: str) -> None:
        self._key = hashlib.sha256(b"gpuprov-dashboard-v1:" + key.encode()).digest()

    def _mac(self, purpose: str, data: bytes) -> str:
        return _b64(hmac.new(self._key, purpose.encode() + b"\0" + data, hashlib.sha256).digest())

    def binding(self, token_hash: str) -> str:
        """The session's tie to its token: an HMAC of the token's stored hash (not the hash)."""
        return self._mac("binding", token_hash.encode())[:22]

    def sign(self, purpose: str, payload: dict[str, Any]) -> str:
        """``payload`` as a signed cookie value for ``purpose``."""
        data = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{data}.{self._mac(purpose, data.encode())}"

    def unsign(self, purpose: str, value: str | None) -> dict[str, Any] | None:
        """The payload of a cookie value signed for ``purpose``; None when absent or forged."""
        if not value or len(value) > _MAX_COOKIE or value.count(".") != 1:
            return None
        data, mac = value.split(".")
        if not same_token(mac, self._mac(purpose, data.encode())):
            return None
        try:
            payload = load_json(_unb64(data))
        except (binascii.Error, ValueError):
            return None
        return payload if isinstance(payload, dict) else None

    def new_session(self, token_id: int, token_hash: str, now: int, lifetime: int) -> str:
        """A session cookie value for the token, valid ``lifetime`` seconds from ``now``."""
        payload = {
            "t": token_id,
            "b": self.binding(token_hash),
            "i": now,
            "e": now + lifetime,
            "c": secrets.token_urlsafe(32),
        }
        return self.sign("session", payload)

    def session(self, value: str | None, now: int) -> SessionData | None:
        """The session a cookie value holds; None when absent, forged, malformed or expired."""
        payload = self.unsign("session", value)
        if payload is None:
            return None
        try:
            data = SessionData(
                token_id=int(payload["t"]),
                binding=str(payload["b"]),
                issued_at=int(payload["i"]),
                expires_at=int(payload["e"]),
                csrf=str(payload["c"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return data if data.issued_at <= now < data.expires_at else None

    def outlived(self, value: str | None, now: int) -> bool:
        """Whether a cookie value is a session of ours whose lifetime has ended (the login page
        then says so; a forged or malformed one is no session to explain)."""
        payload = self.unsign("session", value)
        try:
            return payload is not None and int(payload["e"]) <= now
        except (KeyError, TypeError, ValueError):
            return False

    def new_login(self, now: int) -> tuple[str, str]:
        """A login form's CSRF token and the cookie value that vouches for it."""
        token = secrets.token_urlsafe(32)
        return token, self.sign("login", {"c": token, "i": now})

    def login_token(self, value: str | None, now: int, max_age: int) -> str | None:
        """The CSRF token a login cookie vouches for, if it is recent enough."""
        payload = self.unsign("login", value)
        if payload is None:
            return None
        try:
            token, issued = str(payload["c"]), int(payload["i"])
        except (KeyError, TypeError, ValueError):
            return None
        return token if issued <= now < issued + max_age else None


def same_token(expected: str, given: str | None) -> bool:
    """Whether a submitted secret (CSRF token, MAC, binding) equals the expected one, in
    constant time; compared as UTF-8 bytes, so any text a client sends is an answer, never an
    error (`hmac.compare_digest` refuses ``str`` that is not ASCII)."""
    if given is None:
        return False
    return hmac.compare_digest(
        expected.encode("utf-8", "surrogatepass"), given.encode("utf-8", "surrogatepass")
    )
