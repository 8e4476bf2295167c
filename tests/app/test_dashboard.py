"""The dashboard's foundation, overview and asset pages on both backends: login and sessions
(cookie flags, expiry, revocation, logout), CSRF, scopes, ``next`` validation, security headers
on every answer, escaping of report values, the asset filters (applied or a 400 page) and
pagination."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.clock import utcnow
from app.domain.tokens import hash_secret
from app.http.dashboard import auth as dashboard_auth
from app.http.dashboard.auth import AdminUser, checked_form
from app.http.dashboard.sessions import LOGIN_COOKIE, SESSION_COOKIE
from app.http.dashboard.templating import CONTENT_SECURITY_POLICY
from app.main import create_app
from app.storage.tables import ApiToken
from scanner import vocabulary as v
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.pages import csrf_of, login, session_csrf, with_trust

TRAIN = "registry.example.com/ml/train:1.0"
LEGACY = "registry.example.com/ml/legacy:0.9"
NODE = "gpu-node-1"
XSS_NAME = "<img src=x onerror=alert(1)>"
XSS_PATH = '/opt/"><script>alert(1)</script>/libcudnn.so.9'
PROMOTION = (
    "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules:\n  integrity: {}\n"
)


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    """The backend's test client without cookies from an earlier test."""
    service.client.cookies.clear()
    yield service.client
    service.client.cookies.clear()


def _cookie_header(answer: Any, name: str) -> str:
    found = [h for h in answer.headers.get_list("set-cookie") if h.startswith(name + "=")]
    assert len(found) == 1, answer.headers.get_list("set-cookie")
    return found[0]


def _reader(service: Service, client: TestClient) -> str:
    token = service.token("inventory:read", name="reader")
    assert login(client, token).status_code == 303
    return token


# ------------------------------------------------------------------------------ login, sessions


def test_pages_redirect_to_login_keeping_the_target(client: TestClient) -> None:
    answer = client.get("/assets?kind=image&page=2", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=%2Fassets%3Fkind%3Dimage%26page%3D2"
    assert client.get("/", follow_redirects=False).headers["location"] == "/login"
    # a form posted without a session is no page to come back to: the login leads home
    posted = client.post("/logout", data={"csrf_token": "x"}, follow_redirects=False)
    assert posted.status_code == 303 and posted.headers["location"] == "/login"
    form = client.get(answer.headers["location"])
    assert form.status_code == 200 and 'name="token"' in form.text
    assert 'value="/assets?kind=image&amp;page=2"' in form.text


def test_the_login_forms_command_makes_a_token_that_logs_in(
    service: Service, client: TestClient
) -> None:
    """The command the form names, run as shown (NAME filled in), makes a working token (it
    lacked the required --name)."""
    from typer.testing import CliRunner

    from gpuprov.cli import app as gpuprov_app

    found = re.search(r"<code>gpuprov (token create [^<]*)</code>", client.get("/login").text)
    assert found is not None
    args = found.group(1).replace("NAME", "alice").split()
    made = CliRunner().invoke(gpuprov_app, [*args, "--database-url", service.url])
    assert made.exit_code == 0, made.output
    assert login(client, made.stdout.strip()).status_code == 303


def test_login_sets_a_strict_httponly_session_cookie(service: Service, client: TestClient) -> None:
    token = service.token("inventory:read", name="reader")
    answer = login(client, token, "/assets?kind=host")
    assert answer.status_code == 303 and answer.headers["location"] == "/assets?kind=host"
    cookie = _cookie_header(answer, SESSION_COOKIE)
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= flags
    assert f"max-age={service.settings.session_lifetime_seconds}" in flags
    assert "secure" not in flags  # plain HTTP: a Secure cookie would never come back
    assert token not in cookie  # the secret never travels in the cookie
    # the login form's CSRF cookie is removed with the flags it was set with
    gone = _cookie_header(answer, LOGIN_COOKIE)
    flags = {part.strip().lower() for part in gone.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/login", "max-age=0"} <= flags
    assert client.get("/assets").status_code == 200


def test_cookie_is_secure_over_https(service: Service, client: TestClient) -> None:
    token = service.token("inventory:read")
    form = client.get("https://testserver/login")
    login_cookie = _cookie_header(form, LOGIN_COOKIE).lower()
    assert "secure" in login_cookie and "samesite=strict" in login_cookie
    answer = client.post(
        "https://testserver/login",
        data={"token": token, "csrf_token": csrf_of(form.text), "next": "/"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert "secure" in _cookie_header(answer, SESSION_COOKIE).lower().split("; ")


@pytest.mark.parametrize(
    ("scopes", "status", "message"),
    [
        (None, 401, "unknown or revoked token"),
        (("report:write",), 403, "neither the inventory:read nor the admin scope"),
        (("gate",), 403, "neither the inventory:read nor the admin scope"),
    ],
)
def test_login_refusals_show_the_form_again(
    service: Service, client: TestClient, scopes: tuple[str, ...] | None, status: int, message: str
) -> None:
    token = service.token(*scopes) if scopes else "gpv_not-a-real-token"
    answer = login(client, token)
    assert answer.status_code == status and message in answer.text
    assert 'name="token"' in answer.text
    assert SESSION_COOKIE not in answer.headers.get("set-cookie", "")
    assert client.get("/", follow_redirects=False).status_code == 303


def test_revoked_token_cannot_log_in_and_its_sessions_end(
    service: Service, client: TestClient
) -> None:
    admin = auth(service.token("admin"))
    token = _reader(service, client)
    assert client.get("/").status_code == 200
    tokens = service.client.get("/api/v1/tokens", headers=admin).json()["items"]
    reader_id = next(t["id"] for t in tokens if t["name"] == "reader")
    assert service.client.delete(f"/api/v1/tokens/{reader_id}", headers=admin).status_code in (
        200,
        204,
    )
    assert client.get("/", follow_redirects=False).status_code == 303
    assert login(client, token).status_code == 401


FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "says"),
    [
        (b"token=x", "application/json", 415, "forms are posted as " + FORM),
        (b"token=x", "multipart/form-data; boundary=x", 415, "forms are posted as"),
        (b"token=x", "", 415, "forms are posted as"),
        (b"token=\xff", FORM, 400, "not valid url-encoded UTF-8"),
        (b"token=a%00b", FORM, 400, "NUL character"),
        (b"to%00ken=a", FORM, 400, "NUL character"),
        (b"&".join(b"f%d=1" % i for i in range(201)), FORM, 400, "not valid url-encoded"),
        # the login form is read before anyone is known: 16 KiB (issue 17 §2)
        (b"a=" + b"x" * (16 * 1024 - 1), FORM, 413, "larger than the limit of 16384 bytes"),
        # what a form may be: the media type's case and parameters do not matter, 200 fields
        # and a body of exactly the limit are read (and then refused for their CSRF token)
        (b"token=x", "Application/X-WWW-Form-Urlencoded; charset=utf-8", 403, "CSRF"),
        (b"&".join(b"f%d=1" % i for i in range(200)), FORM, 403, "CSRF"),
        (b"a=" + b"x" * (16 * 1024 - 2), FORM, 403, "CSRF"),
    ],
)
def test_a_posted_form_is_read_or_refused_with_the_reason(
    client: TestClient, body: bytes, content_type: str, status: int, says: str
) -> None:
    answer = client.post("/login", content=body, headers={"Content-Type": content_type})
    assert answer.status_code == status and says in answer.text, answer.text[:300]
    assert SESSION_COOKIE not in client.cookies


def test_a_blank_token_is_asked_for_again(client: TestClient) -> None:
    form = client.get("/login")
    answer = client.post(
        "/login",
        data={"token": "   ", "csrf_token": csrf_of(form.text), "next": "/"},
        follow_redirects=False,
    )
    assert answer.status_code == 400 and "enter a service token" in answer.text
    assert 'name="token"' in answer.text and SESSION_COOKIE not in client.cookies


def test_the_last_of_a_repeated_field_counts(service: Service, client: TestClient) -> None:
    token = service.token("inventory:read")
    form = client.get("/login")
    good = csrf_of(form.text)
    body = f"csrf_token=wrong&csrf_token={good}&token=nope&token={token}&next=/assets"
    answer = client.post(
        "/login", content=body, headers={"Content-Type": FORM}, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/assets"


def test_login_form_csrf_is_required(service: Service, client: TestClient) -> None:
    token = service.token("inventory:read")
    client.get("/login")
    missing = client.post("/login", data={"token": token}, follow_redirects=False)
    assert missing.status_code == 403 and "CSRF" in missing.text
    wrong = client.post(
        "/login", data={"token": token, "csrf_token": "x" * 43}, follow_redirects=False
    )
    assert wrong.status_code == 403
    # a token copied from a form but without its cookie (another browser's form) is refused
    form = client.get("/login")
    client.cookies.clear()
    stolen = client.post(
        "/login", data={"token": token, "csrf_token": csrf_of(form.text)}, follow_redirects=False
    )
    assert stolen.status_code == 403
    assert SESSION_COOKIE not in client.cookies


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example/x",
        "///evil.example",  # no netloc to urlsplit, but a browser goes to evil.example
        "////evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
        "assets",
        "/assets\nSet-Cookie: x=1",
    ],
)
def test_next_must_be_a_local_path(service: Service, client: TestClient, target: str) -> None:
    assert client.get("/login", params={"next": target}).status_code == 400
    token = service.token("inventory:read")
    answer = login(client, token, target)
    assert answer.status_code == 400 and "local path" in answer.text
    assert SESSION_COOKIE not in client.cookies


def test_session_expires(
    service: Service, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _reader(service, client)
    assert client.get("/").status_code == 200
    later = utcnow() + timedelta(seconds=service.settings.session_lifetime_seconds + 1)
    monkeypatch.setattr(dashboard_auth, "utcnow", lambda: later)
    answer = client.get("/assets", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")


def test_a_forged_or_altered_cookie_is_refused(service: Service, client: TestClient) -> None:
    _reader(service, client)
    value = client.cookies[SESSION_COOKIE]
    data, mac = value.split(".")
    for forged in (
        data + "." + mac[:-2] + "AA",
        data[:-4] + "." + mac,
        "garbage",
        "a.b.c",
        data + ".",  # the MAC is compared whole: an empty one is no prefix of it
        data + "." + mac[:10],
        data + "." + mac + "A",
        "." + mac,
    ):
        client.cookies.set(SESSION_COOKIE, forged)
        assert client.get("/", follow_redirects=False).status_code == 303, forged
    client.cookies.set(SESSION_COOKIE, value)
    assert client.get("/", follow_redirects=False).status_code == 200


def test_a_session_is_bound_to_its_tokens_hash(service: Service, client: TestClient) -> None:
    # a cookie the service signed itself, for a live token, but bound to another token's hash
    # (a token replaced under the same id, a key shared with another deployment) is refused
    _reader(service, client)
    signer = client.app.state.dashboard_signer  # type: ignore[attr-defined]
    session = signer.session(client.cookies[SESSION_COOKIE], int(utcnow().timestamp()))
    assert session is not None
    now = int(utcnow().timestamp())
    for other in ("0" * 64, hash_secret(service.token("inventory:read", name="other")), ""):
        forged = signer.new_session(session.token_id, other, now, 3600)
        client.cookies.set(SESSION_COOKIE, forged)
        assert client.get("/", follow_redirects=False).status_code == 303, other
    token_id = session.token_id
    with service.db.session() as db:
        token = db.get(ApiToken, token_id)
        assert token is not None
        right = token.token_hash
    client.cookies.set(SESSION_COOKIE, signer.new_session(token_id, right, now, 3600))
    assert client.get("/", follow_redirects=False).status_code == 200


def test_logout_needs_the_csrf_token_and_ends_the_session(
    service: Service, client: TestClient
) -> None:
    _reader(service, client)
    csrf = session_csrf(client)
    refused = client.post("/logout", data={"csrf_token": "wrong"}, follow_redirects=False)
    assert refused.status_code == 403 and "CSRF" in refused.text
    assert client.post("/logout", data={}, follow_redirects=False).status_code in (403, 415)
    assert client.get("/").status_code == 200  # still logged in
    answer = client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login?ended=logged-out"
    gone = {p.strip().lower() for p in _cookie_header(answer, SESSION_COOKIE).split(";")[1:]}
    assert {"max-age=0", "httponly", "samesite=strict", "path=/"} <= gone
    assert client.get("/", follow_redirects=False).status_code == 303


def test_scopes_reader_and_admin(service: Service) -> None:
    """A page behind the admin dependency: a reader gets 403, an admin the page."""
    app = create_app(service.settings)
    extra = APIRouter()

    @extra.post("/admin-probe")
    async def probe(request: Request, user: AdminUser) -> PlainTextResponse:
        await checked_form(request, user)
        return PlainTextResponse("done")

    app.include_router(extra)
    with TestClient(app) as own:
        reader = service.token("inventory:read", name="reader")
        assert login(own, reader).status_code == 303
        csrf = session_csrf(own)
        refused = own.post("/admin-probe", data={"csrf_token": csrf})
        assert refused.status_code == 403
        own.cookies.clear()
        admin = service.token("admin", name="boss")
        assert login(own, admin).status_code == 303
        csrf = session_csrf(own)
        assert own.post("/admin-probe", data={"csrf_token": "no"}).status_code == 403
        assert own.post("/admin-probe", data={"csrf_token": csrf}).text == "done"


# ---------------------------------------------------------------------------------- headers


def test_security_headers_on_every_answer(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    asset_id = post_report(boms.encode(boms.gpuprov_bom())).json()["asset_id"]
    anonymous = [client.get("/login"), client.get("/static/dashboard.css")]
    _reader(service, client)
    pages = [
        client.get(path)
        for path in (
            "/",
            "/assets",
            f"/assets/{asset_id}",
            "/assets?kind=vm",
            "/assets/999999",
            f"/assets/{asset_id}/sbom",
            "/api/v1/assets",
            "/healthz",
        )
    ]
    for answer in [*anonymous, *pages]:
        csp = answer.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, answer.url
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        if answer.headers["content-type"].startswith("text/html"):
            assert csp == CONTENT_SECURITY_POLICY, answer.url
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["x-frame-options"] == "DENY"
    for answer in pages[:3]:
        assert answer.headers["cache-control"] == "no-store"
        assert "<script" not in answer.text and " style=" not in answer.text
    assert anonymous[1].headers["content-type"].startswith("text/css")


def test_error_pages_are_html_for_pages_and_json_for_the_api(
    service: Service, client: TestClient
) -> None:
    _reader(service, client)
    page = client.get("/assets/12345")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "no asset with id 12345" in page.text
    unknown = client.get("/assets?familly=cudnn")
    assert unknown.status_code == 400 and "unknown query parameter familly" in unknown.text
    api = client.get("/api/v1/assets/12345")
    assert api.status_code == 401 and api.json()["error"]["status"] == 401
    # a mistyped page is a page for a browser (it was {"detail": "Not Found"}), JSON otherwise
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    for path in ("/search", "/compliance/NOPE", "/assets/1/nope"):
        missing = client.get(path, headers=html)
        assert missing.status_code == 404, path
        assert missing.headers["content-type"].startswith("text/html") and "404" in missing.text
        assert client.get(path).json()["error"]["status"] == 404
    assert client.get("/api/v1/nope", headers=html).json()["error"]["status"] == 404


# ------------------------------------------------------------------------------ escaping


def test_report_values_render_as_text(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    lib = boms.Lib(path=XSS_PATH, family="cudnn", component="cudnn", version="9.1.0.70")
    bom = boms.gpuprov_bom(
        kind="host",
        name=XSS_NAME,
        owners=[],
        extra_libs=[lib],
        labels={"team": '"><script>alert(2)</script>'},
    )
    process = {"pid": 4242, "exe": "/usr/bin/<script>alert(3)</script>", "pod": "trainer-0"}
    bom["components"][0]["properties"].append(
        {"name": v.RUNTIME_PROCESS, "value": json.dumps(process)}
    )
    answer = post_report(boms.encode(bom))
    assert answer.status_code == 201, answer.text
    asset_id = answer.json()["asset_id"]
    _reader(service, client)
    detail = _text(client.get(f"/assets/{asset_id}").text)
    assert "/usr/bin/&lt;script&gt;alert(3)&lt;/script&gt;" in detail  # loaded by, as text
    assert "pid 4242" in detail and "pod trainer-0" in detail
    for path in ("/assets", f"/assets/{asset_id}"):
        html = client.get(path).text
        assert "<script" not in html and "<img src=x" not in html, path
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
    detail = _text(client.get(f"/assets/{asset_id}").text)
    assert "&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in detail
    # the label reaches a link's query string url-encoded, never raw
    listing = client.get("/assets").text
    assert "label=team%3D%22%3E%3Cscript%3Ealert%282%29%3C%2Fscript%3E" in listing


# ------------------------------------------------------------------------ assets, filters


def _fleet(post_report: Callable[..., Any]) -> dict[str, int]:
    """A small fleet: a signed SLSA 3 image with cuDNN 9.1, an unsigned image with cuDNN 8.9
    and a modified file, a host in env=prod with cuDNN 9.1."""
    signed = with_trust(
        boms.gpuprov_bom(name=TRAIN, labels={"env": "staging"}),
        "https://github.com/acme/ml/.github/workflows/build.yml@refs/heads/main",
        3,
        "https://github.com/actions/runner",
    )
    old = boms.cudnn_wheel("8.9.7.29")
    old.libs[0] = boms.Lib(**{**old.libs[0].__dict__, "integrity": "modified"})
    unsigned = boms.gpuprov_bom(name=LEGACY, owners=[old], labels={"env": "staging"})
    host = boms.gpuprov_bom(kind="host", name=NODE, labels={"env": "prod"})
    ids = {}
    for key, bom in (("signed", signed), ("unsigned", unsigned), ("host", host)):
        answer = post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
        ids[key] = answer.json()["asset_id"]
    return ids


def _text(html: str) -> str:
    """A page without the line-break hints of its paths and names (``<wbr>`` after a slash)."""
    return html.replace("<wbr>", "")


def _names(html: str) -> set[str]:
    return set(re.findall(r'<a href="/assets/\d+">([^<]+)</a>', _text(html)))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {TRAIN, LEGACY, NODE}),
        ("kind=host", {NODE}),
        ("kind=image&label=env%3Dstaging", {TRAIN, LEGACY}),
        ("label=env%3Dprod", {NODE}),
        ("family=cudnn&version=8.9.*", {LEGACY}),
        ("family=cudnn&version=%3E%3D9.0", {TRAIN, NODE}),
        ("verdict=modified", {LEGACY}),
        ("signed=true", {TRAIN}),
        ("signed=false&kind=image", {LEGACY}),
        ("slsa=3", {TRAIN}),
        ("name=registry.example.com%2F*", {TRAIN, LEGACY}),
        # a blank form field means "any"
        ("kind=&family=&version=&verdict=&signed=&slsa=&label=&name=", {TRAIN, LEGACY, NODE}),
    ],
)
def test_asset_filters(
    service: Service,
    client: TestClient,
    post_report: Callable[..., Any],
    query: str,
    expected: set[str],
) -> None:
    _fleet(post_report)
    _reader(service, client)
    answer = client.get(f"/assets?{query}")
    assert answer.status_code == 200, answer.text
    assert _names(answer.text) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("kind=vm", "kind must be one of image, host"),
        ("verdict=great", "verdict must be one of"),
        ("signed=maybe", "signed must be true or false"),
        ("slsa=4", "slsa must be one of 0, 1, 2, 3"),
        ("version=%3E%3D", "version:"),
        ("label=env", "must be KEY=VALUE"),
        ("page=0", "page"),
        ("per_page=100000", "per_page"),
        ("kind=image&kind=host", "may be given once"),
        ("colour=red", "unknown query parameter colour"),
    ],
)
def test_invalid_filters_are_a_400_page(
    service: Service, client: TestClient, query: str, message: str
) -> None:
    _reader(service, client)
    answer = client.get(f"/assets?{query}")
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert message in answer.text


def _status_fleet(service: Service, post_report: Callable[..., Any]) -> dict[str, int]:
    """`_fleet` plus an image in provenance conflict, a host holding an unowned file and one
    without a record, two policies and gate decisions: TRAIN allowed under both, LEGACY allowed
    under lax and denied under prod's second version (its modified file) after prod's first
    version allowed it."""
    ids = _fleet(post_report)
    wheel = boms.cudnn_wheel()
    conflict = boms.Owner(
        wheel.purl,
        wheel.name,
        wheel.version,
        [boms.Lib(**{**wheel.libs[0].__dict__, "provenance": "conflict"}), *wheel.libs[1:]],
    )
    extra = [
        boms.Lib("/opt/x/libcudart.so.12", "cudart", "cudart", "12.4.127", integrity="unowned")
    ]
    record = [
        boms.Lib("/opt/y/libcudart.so.12", "cudart", "cudart", "12.4.127", integrity="no-record")
    ]
    for key, bom in (
        ("conflict", boms.gpuprov_bom(name=f"{TRAIN}-conflict", owners=[conflict])),
        ("unowned", boms.gpuprov_bom(kind="host", name="node-unowned", extra_libs=extra)),
        ("record", boms.gpuprov_bom(kind="host", name="node-record", owners=[], extra_libs=record)),
    ):
        answer = post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
        ids[key] = answer.json()["asset_id"]
    admin = auth(service.token("admin"), **{"Content-Type": "application/yaml"})
    lax = PROMOTION.replace("name: prod", "name: lax").replace("integrity: {}", "ownership: {}")
    gate = auth(service.token("gate"))

    def put(name: str, document: str) -> None:
        answer = service.client.put(f"/api/v1/policies/{name}", content=document, headers=admin)
        assert answer.status_code == 201, answer.text

    def decide(policy: str, image: str, decision: str) -> None:
        digest = "sha256:" + boms.digest_of("manifest", image)
        answer = service.client.post(
            "/api/v1/gate", json={"policy": policy, "image": digest}, headers=gate
        )
        assert answer.status_code == 200 and answer.json()["decision"] == decision, answer.text

    # prod's first version allowed LEGACY; its second denies it: the latest decision counts
    put("prod", lax.replace("name: lax", "name: prod"))
    decide("prod", LEGACY, "allow")
    put("prod", PROMOTION)
    put("lax", lax)
    decide("lax", LEGACY, "allow")
    decide("prod", LEGACY, "deny")
    decide("prod", TRAIN, "allow")
    decide("lax", TRAIN, "allow")
    return ids


def _status_cells(html: str) -> dict[str, tuple[str, str]]:
    """Per asset name on the list: its status and its latest decisions (text)."""
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", _text(html), re.S):
        name = re.search(r'<a href="/assets/\d+">([^<]+)</a>', row)
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)
        if name and len(cells) >= 4:
            status = re.sub(r"<[^>]+>|\s+", " ", cells[2]).strip()
            gates = re.sub(r"<[^>]+>|\s+", " ", cells[3]).split()
            rows[name.group(1)] = (status, " ".join(gates))
    return rows


def test_the_asset_list_shows_status_and_latest_decisions(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    _status_fleet(service, post_report)
    _reader(service, client)
    rows = _status_cells(client.get("/assets").text)
    assert rows[f"{TRAIN}-conflict"][0] == "conflict"
    assert rows[LEGACY] == ("modified", "allow lax deny prod")  # the latest under each policy
    assert rows[TRAIN] == ("verified", "allow lax allow prod")
    assert rows["node-unowned"][0] == "unowned"
    assert rows["node-record"] == ("no-record", "never gated")
    assert rows[NODE][1] == "never gated"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=conflict", [f"{TRAIN}-conflict"]),
        ("status=modified", [LEGACY]),
        ("status=unowned", ["node-unowned"]),
        ("status=no-record", ["node-record"]),
        ("status=verified&kind=image", [TRAIN]),
        ("gate=deny", [LEGACY]),
        ("gate=allow", [TRAIN, LEGACY]),  # LEGACY: its latest under lax is an allow
        ("gate=none&kind=image", [f"{TRAIN}-conflict"]),
        ("gate=warn", []),
        # worst first; the same status by id
        (
            "sort=status",
            [f"{TRAIN}-conflict", LEGACY, "node-unowned", "node-record", TRAIN, NODE],
        ),
        (
            "sort=-status",
            [TRAIN, NODE, "node-record", "node-unowned", LEGACY, f"{TRAIN}-conflict"],
        ),
        ("sort=name&kind=host", ["gpu-node-1", "node-record", "node-unowned"]),
        ("sort=-name&kind=host", ["node-unowned", "node-record", "gpu-node-1"]),
    ],
)
def test_the_asset_list_filters_and_sorts_by_status_and_gate(
    service: Service,
    client: TestClient,
    post_report: Callable[..., Any],
    query: str,
    expected: list[str],
) -> None:
    _status_fleet(service, post_report)
    _reader(service, client)
    answer = client.get(f"/assets?{query}")
    assert answer.status_code == 200, answer.text
    names = re.findall(r'<a href="/assets/\d+">([^<]+)</a>', _text(answer.text))
    assert names == expected
    # the total counts what the filter keeps (the status filter joins the verdict counts)
    shown = len(expected)
    assert (f"1–{shown} of {shown}" if shown else "0–0 of 0") in answer.text


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=bad", "status must be one of conflict, modified"),
        ("gate=maybe", "gate must be one of deny, warn, allow, none"),
        ("sort=colour", "sort must be one of name, -name, status"),
    ],
)
def test_bad_status_gate_or_sort_is_a_400_page(
    service: Service, client: TestClient, query: str, message: str
) -> None:
    _reader(service, client)
    answer = client.get(f"/assets?{query}")
    assert answer.status_code == 400 and message in answer.text, answer.text


def test_the_asset_page_lists_its_gate_decisions(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    ids = _status_fleet(service, post_report)
    _reader(service, client)
    html = _text(client.get(f"/assets/{ids['unsigned']}").text)
    section = html[html.index("<h2>Gate decisions</h2>") : html.index('<h2 id="libraries">')]
    linked = re.findall(r'<a href="/decisions/(\d+)">', section)
    decisions = service.client.get(
        "/api/v1/gate/decisions", headers=auth(service.token("inventory:read"))
    ).json()["items"]
    own = [str(d["id"]) for d in decisions if d["subject"]["asset_id"] == ids["unsigned"]]
    assert len(own) == 3 and set(linked) == set(own)
    assert "deny" in section and "lax" in section and "prod" in section
    never = _text(client.get(f"/assets/{ids['host']}").text)
    assert "The gate has not decided on this asset." in never


def test_the_asset_page_groups_its_libraries_and_pages_them(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    libs = [
        boms.Lib(f"/opt/env-{d}/lib/libcudart.so.12.{n}", "cudart", "cudart", f"12.{n}.1")
        for d in (2, 1)
        for n in range(3)
    ]
    libs[4] = boms.Lib(**{**libs[4].__dict__, "integrity": "modified"})
    bom = boms.gpuprov_bom(kind="host", name="node-many", owners=[], extra_libs=libs)
    answer = post_report(boms.encode(bom))
    assert answer.status_code == 201, answer.text
    asset = answer.json()["asset_id"]
    _reader(service, client)
    first = _text(client.get(f"/assets/{asset}?per_page=4").text)
    directories = re.findall(r'<tr class="dir"><th [^>]*>([^<]+)</th>', first)
    assert directories == ["/opt/env-1/lib/", "/opt/env-2/lib/"]  # each once, in order
    files = re.findall(r'<td class="file mono" title="([^"]+)">', first)
    assert files == [
        "/opt/env-1/lib/libcudart.so.12.0",
        "/opt/env-1/lib/libcudart.so.12.1",
        "/opt/env-1/lib/libcudart.so.12.2",
        "/opt/env-2/lib/libcudart.so.12.0",
    ]
    assert "1–4 of 6" in first
    second = _text(client.get(f"/assets/{asset}?per_page=4&page=2").text)
    assert re.findall(r'<td class="file mono" title="([^"]+)">', second) == [
        "/opt/env-2/lib/libcudart.so.12.1",
        "/opt/env-2/lib/libcudart.so.12.2",
    ]
    assert re.findall(r'<tr class="dir"><th [^>]*>([^<]+)</th>', second) == ["/opt/env-2/lib/"]
    findings = _text(client.get(f"/assets/{asset}?files=findings").text)
    assert re.findall(r'<td class="file mono" title="([^"]+)">', findings) == [
        "/opt/env-1/lib/libcudart.so.12.1"
    ]
    bad = client.get(f"/assets/{asset}?files=some")
    assert bad.status_code == 400 and "files must be one of all, findings" in bad.text


def test_asset_pagination_keeps_the_filters(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    for n in range(5):
        bom = boms.gpuprov_bom(kind="host", name=f"node-{n}", labels={"env": "prod"})
        assert post_report(boms.encode(bom)).status_code == 201
    post_report(boms.encode(boms.gpuprov_bom(kind="host", name="other")))
    _reader(service, client)
    first = client.get("/assets?label=env%3Dprod&per_page=2")
    assert _names(first.text) == {"node-0", "node-1"} and "1–2 of 5" in first.text
    next_link = re.search(r'<a href="([^"]+)" rel="next">', first.text)
    assert next_link is not None
    url = next_link.group(1).replace("&amp;", "&")
    assert url == "/assets?label=env%3Dprod&per_page=2&page=2"
    second = client.get(url)
    assert _names(second.text) == {"node-2", "node-3"} and 'rel="prev"' in second.text
    last = client.get("/assets?label=env%3Dprod&per_page=2&page=3")
    assert _names(last.text) == {"node-4"} and 'rel="next"' not in last.text
    beyond = client.get("/assets?label=env%3Dprod&per_page=2&page=9")
    assert beyond.status_code == 200 and "No asset matches" in beyond.text


def test_asset_detail(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    admin = auth(service.token("admin"), **{"Content-Type": "application/yaml"})
    put = service.client.put("/api/v1/policies/prod", content=PROMOTION.encode(), headers=admin)
    assert put.status_code == 201, put.text
    ids = _fleet(post_report)
    # a second scan of the legacy image: cuDNN moved on, one file's digest changed
    newer = boms.cudnn_wheel("8.9.7.29")
    newer.libs[0] = boms.Lib(**{**newer.libs[0].__dict__, "integrity": "modified"})
    newer.libs[1] = boms.Lib(**{**newer.libs[1].__dict__, "sha256": boms.digest_of("patched")})
    rescan = boms.gpuprov_bom(
        name=LEGACY,
        owners=[newer],
        timestamp="2026-11-30T13:00:00Z",
        labels={"env": "staging"},
    )
    assert post_report(boms.encode(rescan)).status_code == 201
    _reader(service, client)

    signed = client.get(f"/assets/{ids['signed']}").text
    assert "build.yml@refs/heads/main" in signed and "https://github.com/actions/runner" in signed
    assert "libcudnn_graph.so.9" in signed and "9.1.0.70" in signed
    assert "Policy prod v1" in signed and "CIS Critical Security Controls v8" in signed

    legacy = client.get(f"/assets/{ids['unsigned']}").text
    assert "libcudnn_ops.so.8" in legacy
    assert "Changes since the scan before" in legacy
    assert "libcudnn_graph.so.8" in legacy and "digest" in legacy  # the changed file
    assert "deny" in legacy  # the modified file fails the integrity rule

    original = client.get(f"/assets/{ids['host']}/sbom")
    assert original.status_code == 200 and "attachment" in original.headers["content-disposition"]
    assert json.loads(original.content)["metadata"]["component"]["name"] == NODE
    normalized = client.get(f"/assets/{ids['host']}/sbom?format=normalized")
    assert normalized.status_code == 200 and json.loads(normalized.content)["specVersion"] == "1.6"
    assert client.get(f"/assets/{ids['host']}/sbom?format=xml").status_code == 400
    assert client.get("/assets/999999/sbom").status_code == 404


# ---------------------------------------------------------------------------------- overview


def _overview_fleet(service: Service, post_report: Callable[..., Any]) -> dict[str, int]:
    """`_fleet` plus an image with a file in conflict with a signed catalog and another copy
    of cuDNN 9.1.0.70 with different bytes (drift), an unowned CUDA runtime on a host, and gate
    decisions under a stored policy."""
    admin = auth(service.token("admin"), **{"Content-Type": "application/yaml"})
    put = service.client.put("/api/v1/policies/prod", content=PROMOTION.encode(), headers=admin)
    assert put.status_code == 201, put.text
    ids = _fleet(post_report)
    tampered = boms.cudnn_wheel()
    tampered.libs[0] = boms.Lib(
        **{
            **tampered.libs[0].__dict__,
            "sha256": boms.digest_of("tampered"),
            "provenance": "conflict",
        }
    )
    stray = boms.Lib(
        path="/opt/app/lib/libcudart.so.12",
        family="cudart",
        component="cudart",
        version="12.4.127",
        integrity="unowned",
    )
    for key, bom in (
        ("tampered", boms.gpuprov_bom(name="registry.example.com/ml/evil:6.6", owners=[tampered])),
        ("stray", boms.gpuprov_bom(kind="host", name="gpu-node-2", extra_libs=[stray])),
    ):
        answer = post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
        ids[key] = answer.json()["asset_id"]
    gate = auth(service.token("gate"))
    for name in (TRAIN, LEGACY):
        digest = boms.gpuprov_bom(name=name)["metadata"]["component"]["version"]
        answer = service.client.post(
            "/api/v1/gate", json={"policy": "prod", "image": digest}, headers=gate
        )
        assert answer.status_code == 200, answer.text
    return ids


def test_overview_figures(service: Service, post_report: Callable[..., Any]) -> None:
    from app.domain.dashboard import overview

    ids = _overview_fleet(service, post_report)
    with service.db.session() as session:
        o = overview(session, utcnow())
    assert (o["images"], o["hosts"]) == (3, 2)
    # cuDNN's 8 files + 4 CUDA wheels' on train and gpu-node-1, cuDNN only on legacy and evil,
    # gpu-node-2's 12 + 1 stray
    assert o["files"] == 12 + 8 + 12 + 8 + 13
    assert o["integrity_verified"] == o["files"] - 2
    assert o["modified"] == {"files": 1, "assets": 1}
    assert o["unowned"] == {"files": 1, "assets": 1}
    assert o["provenance_conflicts"] == 1 and o["provenance_verified"] == 0
    # libcudnn.so.9 9.1.0.70 and the CUDA runtime 12.4.127, each seen with two digests
    assert o["digest_conflicts"] == 2
    assert o["decisions"] == {"allow": 1, "warn": 0, "deny": 1}
    cudnn = dict(o["versions"]["cudnn"])
    assert cudnn == {"9.1.0.70": 4, "8.9.7.29": 1}
    assert dict(o["versions"]["cudart"]) == {"12.4.127": 3}
    urgent = [(f["finding"], f["asset"]["id"], f["files"]) for f in o["urgent"]]
    assert urgent == [
        ("provenance conflict", ids["tampered"], 1),
        ("modified", ids["unsigned"], 1),
        ("unowned", ids["stray"], 1),
    ]
    assert o["urgent"][0]["example_path"].endswith("/cudnn/lib/libcudnn.so.9")


def test_overview_page(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    ids = _overview_fleet(service, post_report)
    _reader(service, client)
    html = _text(client.get("/").text)
    assert "<svg" in html and "cuDNN versions in use" in html
    assert 'href="/assets?family=cudnn&amp;version=9.1.0.70"' in html
    assert f'<a href="/assets/{ids["tampered"]}">registry.example.com/ml/evil:6.6</a>' in html
    # three clicks at most: overview -> the tampered image -> its failing file and controls
    detail = client.get(f"/assets/{ids['tampered']}").text
    assert "libcudnn.so.9" in detail and "conflict" in detail
    chart_link = client.get("/assets?family=cudnn&version=8.9.7.29")
    assert _names(chart_link.text) == {LEGACY}


def test_overview_of_an_empty_fleet(service: Service, client: TestClient) -> None:
    _reader(service, client)
    html = client.get("/").text
    assert "no cuDNN library in the fleet" in html
    assert "No modified, unowned or conflicting GPU library file" in html


def test_overview_reads_its_indexes(service: Service) -> None:
    """The statements the overview runs, explained as run: only the findings read current
    files (through `ix_artifact_current_findings`); the verdict shares, digest conflicts and
    versions read the fleet-wide counts kept at ingest, never every current file."""
    from app.domain.dashboard import overview

    statements: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append((statement, params))

    engine = service.db.engine
    event.listen(engine, "before_cursor_execute", capture)
    try:
        with service.db.session() as session:
            overview(session, utcnow())
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    plans = {}
    with engine.connect() as conn:
        if service.backend == "postgresql":
            conn.exec_driver_sql("SET enable_seqscan = off")
        prefix = "EXPLAIN " if service.backend == "postgresql" else "EXPLAIN QUERY PLAN "
        for statement, params in statements:
            rows = conn.exec_driver_sql(prefix + statement, params).all()
            plans[statement] = "\n".join(str(row[-1]) for row in rows)
    found = {
        name: [s for s, plan in plans.items() if name in plan]
        for name in ("ix_artifact_current_facts", "ix_artifact_current_findings")
    }
    assert found["ix_artifact_current_facts"] == [], plans
    assert len(found["ix_artifact_current_findings"]) == 2, plans  # finding assets, urgent
    reading = {
        name: [s for s in plans if f"FROM {name}" in s]
        for name in ("artifact", "asset_library", "asset_file_verdicts", "library_digest")
    }
    assert reading["artifact"] == found["ix_artifact_current_findings"], plans
    assert reading["asset_library"] == [], plans
    assert len(reading["asset_file_verdicts"]) == 1, plans  # the verdict shares
    assert len(reading["library_digest"]) == 1, plans  # the digest conflicts
    assert any("FROM library_version" in s for s in plans), plans  # the charts


def test_every_link_of_the_overview_and_asset_pages_leads_somewhere(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    ids = _overview_fleet(service, post_report)
    _reader(service, client)
    pages = ["/", "/assets", *(f"/assets/{i}" for i in ids.values())]
    links: set[str] = set()
    for page in pages:
        html = client.get(page).text
        links |= {h.replace("&amp;", "&") for h in re.findall(r'href="(/[^"]*)"', html)}
    assert len(links) > 20
    for link in sorted(links):
        answer = client.get(link)
        assert answer.status_code == 200, (link, answer.status_code, answer.text[-300:])


def test_overview_figures_are_reused_for_the_cache_time(
    service: Service, post_report: Callable[..., Any]
) -> None:
    app = create_app(service.settings.model_copy(update={"dashboard_cache_seconds": 3600}))
    with TestClient(app) as own:
        assert login(own, service.token("inventory:read")).status_code == 303
        post_report(boms.encode(boms.gpuprov_bom(kind="host", name="first")))
        first = own.get("/").text
        assert re.search(r'<div class="figure">1</div><div class="label">host<', first)
        post_report(boms.encode(boms.gpuprov_bom(kind="host", name="second")))
        assert own.get("/").text == first  # the same figures, "as of" the same time
        app.state.overview_cache.clear()
        again = own.get("/").text
        assert re.search(r'<div class="figure">2</div><div class="label">hosts', again)


def test_long_change_and_file_lists_show_their_first_entries_and_keep_the_rest(
    service: Service, client: TestClient, post_report: Callable[..., Any]
) -> None:
    host = {"kind": "host", "name": "node-grows", "machine_id": "b7", "owners": []}
    libs = [
        boms.Lib(f"/opt/env/lib/libcudart.so.12.{n}", "cudart", "cudart", "12.4.127")
        for n in range(12)
    ]
    for extra, when in (([], "2026-11-30T00:00:00Z"), (libs, "2026-12-01T00:00:00Z")):
        bom = boms.gpuprov_bom(**host, extra_libs=extra, timestamp=when)
        answer = post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
    asset = answer.json()["asset_id"]
    _reader(service, client)
    page = _text(client.get(f"/assets/{asset}").text)
    history = page[page.index("<h2>Scan history</h2>") :]
    shown, hidden = history.split("<details>", 1)
    assert shown.count('<li class="added">+ ') == 8
    assert "and 4 more added" in hidden
    assert all(f"/opt/env/lib/libcudart.so.12.{n}" in history for n in range(12))
    used = _text(client.get("/libraries/where-used?family=cudart").text)
    assert used.count("/opt/env/lib/libcudart.so.12.") == 10
    assert f'<a href="/assets/{asset}#libraries">and 2 more on its page</a>' in used
    changes = _text(client.get("/drift/changes").text)
    assert changes.count("/opt/env/lib/libcudart.so.12.") == 8
    assert "and 4 more added (its page)" in changes
