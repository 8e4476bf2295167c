"""The dashboard's cookie signer (app/http/dashboard/sessions.py) on its own: what a signed value
must be to be read back, the session's validity window and binding, the login form's token,
and the CSRF comparison. test_dashboard.py drives the same through the app."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from starlette.requests import Request

from app.errors import AppError, BadRequest
from app.http.dashboard.auth import read_form, safe_next
from app.http.dashboard.sessions import Signer, same_token

KEY = "k" * 32
NOW = 1_800_000_007  # low bits set: issued + max_age is no issued | max_age
HASH = "ab" * 32


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_signed_value_reads_back_only_as_signed() -> None:
    signer = Signer(KEY)
    value = signer.sign("session", {"t": 1, "x": "y"})
    assert signer.unsign("session", value) == {"t": 1, "x": "y"}
    data, mac = value.split(".")
    for forged in (
        None,
        "",
        data,  # no MAC
        data + ".",  # an empty MAC
        f"{data}.{mac[:-1]}",  # a prefix of the MAC
        f"{data}.{mac}A",
        f"{data}.{mac}.{mac}",
        f"{data[:-1]}.{mac}",
        f"{_b64(b'{}')}.{mac}",
    ):
        assert signer.unsign("session", forged) is None, forged
    # another purpose or another key signs other MACs
    assert signer.unsign("login", value) is None
    assert Signer("j" * 32).unsign("session", value) is None
    assert Signer(KEY).unsign("session", value) == {"t": 1, "x": "y"}


def test_only_a_signed_json_object_is_a_payload() -> None:
    signer = Signer(KEY)
    for data in (_b64(b"[1, 2]"), _b64(b"not json"), "%%%", _b64(b"\xff\xfe")):
        value = f"{data}.{signer._mac('session', data.encode())}"
        assert signer.unsign("session", value) is None, data


def test_values_longer_than_a_cookie_we_write_are_refused() -> None:
    signer = Signer(KEY)

    def of_length(n: int) -> str:
        pad = 0
        while len(value := signer.sign("session", {"p": "x" * pad})) < n:
            pad += 1
        return value

    longest = of_length(1024)
    assert len(longest) == 1024 and signer.unsign("session", longest) is not None
    assert len(of_length(1025)) > 1024
    assert signer.unsign("session", of_length(1025)) is None


def test_a_session_is_valid_from_its_issue_until_its_expiry() -> None:
    signer = Signer(KEY)
    value = signer.new_session(7, HASH, NOW, 3600)
    session = signer.session(value, NOW)
    assert session is not None
    assert (session.token_id, session.issued_at, session.expires_at) == (7, NOW, NOW + 3600)
    assert session.binding == signer.binding(HASH) and len(session.binding) == 22
    assert (
        len(session.csrf) >= 43
        and session.csrf != signer.session(signer.new_session(7, HASH, NOW, 3600), NOW).csrf
    )  # type: ignore[union-attr]
    assert signer.session(value, NOW + 3599) == session
    assert signer.session(value, NOW + 3600) is None  # expired
    assert signer.session(value, NOW + 3601) is None
    assert signer.session(value, NOW + 86_400 * 30) is None
    assert signer.session(value, NOW - 1) is None  # issued in the future
    assert signer.session(None, NOW) is None
    assert signer.session(signer.sign("login", json.loads('{"t": 7}')), NOW) is None


@pytest.mark.parametrize(
    "payload",
    [
        {"b": "x", "i": NOW, "e": NOW + 1, "c": "c"},  # no token
        {"t": 7, "i": NOW, "e": NOW + 1, "c": "c"},  # no binding
        {"t": 7, "b": "x", "e": NOW + 1, "c": "c"},
        {"t": 7, "b": "x", "i": NOW, "c": "c"},
        {"t": 7, "b": "x", "i": NOW, "e": NOW + 1},  # no CSRF token
        {"t": "seven", "b": "x", "i": NOW, "e": NOW + 1, "c": "c"},
        {"t": [7], "b": "x", "i": NOW, "e": NOW + 1, "c": "c"},
        {"t": 7, "b": "x", "i": None, "e": NOW + 1, "c": "c"},
    ],
)
def test_a_session_payload_without_every_field_is_no_session(payload: dict[str, object]) -> None:
    signer = Signer(KEY)
    assert signer.session(signer.sign("session", payload), NOW) is None


def test_the_binding_is_a_mac_of_the_token_hash() -> None:
    signer = Signer(KEY)
    assert signer.binding(HASH) == signer.binding(HASH)
    assert signer.binding(HASH) != signer.binding("cd" * 32)
    assert signer.binding(HASH) != Signer("j" * 32).binding(HASH)
    assert HASH[:22] not in signer.binding(HASH)


def test_a_login_cookie_vouches_for_its_token_for_a_while() -> None:
    signer = Signer(KEY)
    token, cookie = signer.new_login(NOW)
    assert len(token) >= 43 and token != signer.new_login(NOW)[0]
    assert signer.login_token(cookie, NOW, 60) == token
    assert signer.login_token(cookie, NOW + 59, 60) == token
    assert signer.login_token(cookie, NOW + 60, 60) is None
    assert signer.login_token(cookie, NOW + 61, 60) is None
    assert signer.login_token(cookie, NOW + 86_400, 60) is None
    assert signer.login_token(cookie, NOW - 1, 60) is None
    assert signer.login_token(None, NOW, 60) is None
    assert signer.login_token(signer.new_session(1, HASH, NOW, 60), NOW, 60) is None
    for payload in ({"c": token}, {"i": NOW}, {"c": token, "i": "now"}):
        assert signer.login_token(signer.sign("login", payload), NOW, 60) is None


def test_a_csrf_token_is_compared_whole() -> None:
    assert same_token("abc", "abc")
    for given in (None, "", "ab", "abcd", "abC", "xbc", "ábc", "ab\udcff"):
        assert not same_token("abc", given), given


def test_a_non_ascii_cookie_is_no_session() -> None:
    signer = Signer(KEY)
    data, mac = signer.sign("session", {"t": 1}).split(".")
    for forged in (f"{data}.{mac[:-1]}é", f"é{data}.{mac}", "é.é"):
        assert signer.unsign("session", forged) is None


def test_what_a_session_says_cannot_be_changed() -> None:
    session = Signer(KEY).session(Signer(KEY).new_session(7, HASH, NOW, 60), NOW)
    assert session is not None
    with pytest.raises(AttributeError):
        session.token_id = 8  # type: ignore[misc]


def test_payloads_of_every_length_read_back() -> None:
    # base64 without its padding: every length modulo 8 of the encoded payload
    signer = Signer(KEY)
    for n in range(17):
        payload = {"p": "x" * n}
        assert signer.unsign("session", signer.sign("session", payload)) == payload, n


# -- auth.py's pure parts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "target"),
    [
        (None, "/"),
        ("", "/"),
        ("/assets?kind=image", "/assets?kind=image"),
        ("/login", "/"),  # never back to the login form or out again
        ("/logout?x=1", "/"),
        ("/" + "a" * 2047, "/" + "a" * 2047),  # 2048 characters
    ],
)
def test_a_local_next_target(value: str | None, target: str) -> None:
    assert safe_next(value) == target


@pytest.mark.parametrize(
    "value",
    ["/" + "a" * 2048, "//x", "///x", "/\\x", "http://x/", "assets", "/a\tb", "/a\nb"],
)
def test_a_next_target_elsewhere_is_refused(value: str) -> None:
    with pytest.raises(BadRequest, match="next must be a local path"):
        safe_next(value)


def _posted(chunks: list[bytes]) -> Request:
    events = [{"type": "http.request", "body": c, "more_body": True} for c in chunks]
    events.append({"type": "http.request", "body": b"", "more_body": False})

    async def receive() -> dict[str, object]:
        return events.pop(0)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/logout",
        "headers": [(b"content-type", b"application/x-www-form-urlencoded")],
    }
    return Request(scope, receive)  # type: ignore[arg-type]


def test_a_form_is_bounded_whatever_the_request_limit() -> None:
    # read_form counts what it reads itself, so a larger request ceiling never lets a form grow
    chunks = [b"a=" + b"x" * (64 * 1024 - 2), *[b"x" * 64 * 1024] * 15]  # exactly 1 MiB
    whole = asyncio.run(read_form(_posted(chunks)))
    assert len(whole["a"]) == 1024 * 1024 - 2
    with pytest.raises(AppError) as refused:
        asyncio.run(read_form(_posted([*chunks, b"x"])))
    assert (
        refused.value.status == 413
        and "larger than the limit of 1048576 bytes" in refused.value.message
    )


def test_a_session_outlived_its_lifetime_from_its_expiry_on() -> None:
    """`outlived` tells the login page why: a session of ours at or past its expiry, never a
    forged, foreign or malformed cookie."""
    signer = Signer(KEY)
    cookie = signer.sign("session", {"t": 1, "b": HASH, "i": NOW - 10, "e": NOW, "c": "x"})
    assert signer.outlived(cookie, NOW + 1)
    assert signer.outlived(cookie, NOW)  # expiry is exclusive: at `e` the session is over
    assert not signer.outlived(cookie, NOW - 1)
    assert not signer.outlived(None, NOW + 1)
    assert not signer.outlived(cookie + "A", NOW + 1)  # forged
    assert not signer.outlived(signer.sign("login", {"e": NOW}), NOW + 1)  # another purpose
    for malformed in ({"t": 1}, {"e": "soon"}, {"e": None}, {"e": [NOW]}):
        assert not signer.outlived(signer.sign("session", malformed), NOW + 1), malformed
