"""The dashboard's triage forms (issue 19 §4) on both backends, with NVIDIA's real bulletins
matched against real scanner output (`tests.app.test_advisories_list.fleet`): an analysis
recorded on the asset page and on the advisory page (post/redirect/get, a confirmation shown
once), shown beside its finding (state, justification, author, expiry, trusted or not),
withdrawn; refused input shown again with the domain's reason (422, nothing stored); the CSRF
token, the triage scope and the team scope enforced exactly as the API's; every change audited
under the signed-in user, never a field of the form."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from markupsafe import escape
from sqlalchemy import select

from app.clock import utcnow
from app.domain import users
from app.domain.audit import cli_actor
from app.domain.oidc import Role
from app.domain.teams import assign_labels, check_team, put_team
from app.domain.tokens import create_token
from app.http.dashboard.sessions import PERSON_COOKIE
from app.http.dashboard.triage import FLASH_COOKIE
from app.main import create_app
from app.settings import Settings
from app.storage.tables import AdvisoryAnalysis, AuditEvent
from tests.app.conftest import Service, auth
from tests.app.pages import csrf_of, login
from tests.app.test_advisories_list import fleet  # noqa: F401 - the fixture

HOST = "gpu-535.129.03"  # runs a driver bulletin 5703 names: CVE-2025-23280 affected
IMAGE = "layout:toolkit"  # cuobjdump 11.8: CVE-2023-0193 affected
DRIVER_CVE = "CVE-2025-23280"
TOOLKIT_CVE = "CVE-2023-0193"
GOOD = {
    "state": "not_affected",
    "justification": "vulnerable_code_not_in_execute_path",
    "detail": "the driver's <b>kernel module</b> is never loaded on this build host",
    "expires": "",
}


def _client(service: Service, *scopes: str, name: str, team: str | None = None) -> TestClient:
    """A browser of its own, logged in with a new token of ``scopes``."""
    with service.db.transaction(write=True) as session:
        secret = create_token(session, name, list(scopes), team=team).secret
    client = TestClient(service.client.app)
    assert login(client, secret).status_code == 303
    return client


@pytest.fixture
def analyst(service: Service) -> Iterator[TestClient]:
    client = _client(service, "inventory:read", "triage", name="alice")
    yield client
    client.close()


def _page(client: TestClient, path: str, status: int = 200) -> str:
    answer = client.get(path)
    assert answer.status_code == status, (path, answer.status_code, answer.text[-400:])
    assert answer.headers["content-type"].startswith("text/html")
    return answer.text


def _text(page: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities decoded, spaces folded)."""
    body = page.split("<main>", 1)[1].replace("<wbr>", "")
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def _row(page: str, marker: str) -> str:
    """The text of the first table row holding ``marker``."""
    for row in re.findall(r"<tr>(.*?)</tr>", page, re.S):
        if marker in row:
            return _text("<main>" + row)
    raise AssertionError(f"no row holds {marker!r}")


def _post(client: TestClient, path: str, form: dict[str, str], csrf: str | None = "page") -> Any:
    """Post a form as a browser would: with the session's CSRF token unless told otherwise."""
    data = dict(form)
    if csrf == "page":
        data["csrf_token"] = csrf_of(_page(client, "/"))
    elif csrf is not None:
        data["csrf_token"] = csrf
    return client.post(path, data=data, follow_redirects=False)


def _stored(service: Service) -> list[AdvisoryAnalysis]:
    with service.db.session() as session:
        rows = session.scalars(select(AdvisoryAnalysis).order_by(AdvisoryAnalysis.id)).all()
        session.expunge_all()
        return list(rows)


def _events(service: Service, action: str) -> list[AuditEvent]:
    with service.db.session() as session:
        rows = session.scalars(
            select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)
        ).all()
        session.expunge_all()
        return list(rows)


def _record_asset(client: TestClient, asset_id: int, cve: str, **fields: str) -> Any:
    return _post(client, f"/assets/{asset_id}/analyses", {"cve": cve, **GOOD, **fields})


def test_an_analysis_recorded_on_the_asset_page_is_stored_audited_and_shown(
    service: Service,
    analyst: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    host = fleet[HOST]
    page = _page(analyst, f"/assets/{host}")
    # the form sits beside the finding, folded; its fields are OpenVEX's values
    assert f'action="/assets/{host}/analyses"' in page
    form = page.split(f'action="/assets/{host}/analyses"', 1)[1].split("</form>", 1)[0]
    assert f'name="cve" value="{DRIVER_CVE}"' in page
    assert re.findall(r'<option value="(\w+)"', form.split('name="justification"')[0]) == [
        "not_affected",
        "affected",
        "fixed",
        "under_investigation",
    ]
    assert 'value="vulnerable_code_cannot_be_controlled_by_adversary"' in form
    assert 'name="author"' not in page and 'name="source"' not in page
    assert "none" in _row(page, DRIVER_CVE)  # no analysis yet

    # the author is the signed-in user, whatever the form says
    answer = _record_asset(analyst, host, DRIVER_CVE, author="mallory", source="api")
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == f"/assets/{host}#vulnerabilities"
    assert FLASH_COOKIE in answer.headers["set-cookie"]
    (row,) = _stored(service)
    assert (row.cve, row.asset_id, row.state, row.author, row.source) == (
        DRIVER_CVE,
        host,
        "not_affected",
        "alice",
        "web",
    )
    assert row.justification == "vulnerable_code_not_in_execute_path"
    (event,) = _events(service, "analysis.put")
    assert (event.actor, event.source, event.target) == ("alice", "web", f"analysis:{row.id}")
    assert event.details["cve"] == DRIVER_CVE and event.details["asset_id"] == host

    # the page it lands on says so once, and shows the analysis beside the finding
    page = _page(analyst, f"/assets/{host}")
    text = _text(page)
    assert (
        f"Recorded analysis {row.id}: {DRIVER_CVE} not affected (vulnerable code not in "
        f"execute path) for {HOST}, by alice (its author is not on "
        "GPUPROV_VEX_TRUSTED_AUTHORS: shown, the gate does not count it)." in text
    )
    finding = _row(page, DRIVER_CVE)
    assert "not affected vulnerable code not in execute path" in finding
    assert "not trusted" in finding and "by alice" in finding and "no expiry" in finding
    assert " affected " in finding  # the matcher's answer is never rewritten
    assert "&lt;b&gt;kernel module&lt;/b&gt;" in page and "<b>kernel module</b>" not in page
    listed = text.split("Analyses written for this asset (1)", 1)[1]
    assert DRIVER_CVE in listed and "in force" in listed
    assert "Recorded analysis" not in _text(_page(analyst, f"/assets/{host}"))  # once
    # and the API reads what the form stored
    api = service.client.get(
        "/api/v1/analyses", params={"asset_id": host}, headers=auth(service.token("admin"))
    ).json()
    assert [(i["id"], i["author"], i["source"]) for i in api["items"]] == [(row.id, "alice", "web")]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"state": "maybe"}, "state: must be one of not_affected, affected, fixed"),
        ({"state": ""}, "state: must be one of"),
        (
            {"justification": "", "detail": " "},
            "justification: a not_affected analysis needs a justification or a detail",
        ),
        ({"justification": "it_is_fine"}, "justification: must be one of component_not_present"),
        (
            {"state": "affected"},
            "justification: only a not_affected analysis has one",
        ),
        (
            {"state": "fixed", "justification": "", "detail": ""},
            "detail: a fixed analysis needs a detail (what fixed it)",
        ),
        ({"expires": "2020-01-01"}, "expires: is not in the future"),
        ({"expires": "next week"}, "expires: 'next week' is neither a date"),
        ({"expires": "2030-01-31T12:00:00"}, "expires: give the time zone"),
        ({"expires": "9999-12-31T23:00:00-05:00"}, "expires: lies beyond the year 9999"),
        ({"detail": "x" * 4097}, "detail: at most 4096 characters"),
        ({"cve": "not a cve"}, "cve: 'not a cve' is not an advisory id"),
    ],
)
def test_a_refused_analysis_shows_the_page_again_with_the_reason(
    service: Service,
    analyst: TestClient,
    fleet: dict[str, int],  # noqa: F811
    fields: dict[str, str],
    message: str,
) -> None:
    host = fleet[HOST]
    form = {"cve": DRIVER_CVE, **GOOD, "advisory_status": "all", **fields}
    answer = _post(analyst, f"/assets/{host}/analyses", form)
    assert answer.status_code == 422, answer.text[-600:]
    assert answer.headers["content-type"].startswith("text/html")
    text = _text(answer.text)
    assert f"The analysis was not stored: {message}" in text, text[:400]
    assert _stored(service) == [] and _events(service, "analysis.put") == []
    # the page is the asset's, on the tab it was posted from: its links are that page's
    assert "GPU libraries (" in text
    assert f'href="/assets/{host}?advisory_status=fixed#vulnerabilities"' in answer.text
    if fields.get("cve") is None:  # its form opened again, holding what was typed
        opened = answer.text.split('<details class="triage" open>', 1)[1].split("</details>")[0]
        assert f'value="{DRIVER_CVE}"' in opened and 'role="alert"' in opened
        assert str(escape(fields.get("detail", GOOD["detail"]))) in opened


def test_a_form_without_its_csrf_token_or_session_is_refused(
    service: Service,
    analyst: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    host = fleet[HOST]
    form = {"cve": DRIVER_CVE, **GOOD}
    for csrf in (None, "", "0" * 43):
        answer = _post(analyst, f"/assets/{host}/analyses", form, csrf=csrf)
        assert answer.status_code == 403, csrf
        assert "CSRF token is missing or does not match" in _text(answer.text)
        answer = _post(analyst, f"/advisories/{DRIVER_CVE}/analyses", form, csrf=csrf)
        assert answer.status_code == 403 and "CSRF" in answer.text
    assert _stored(service) == []
    # no session: to the login form, nothing read
    anonymous = TestClient(service.client.app)
    answer = anonymous.post(
        f"/assets/{host}/analyses", data={"csrf_token": "x", **form}, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")
    assert _stored(service) == []


def test_a_viewer_sees_no_form_and_may_not_post_one(
    service: Service,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    host = fleet[HOST]
    admin = auth(service.token("admin", name="root"))
    made = service.client.post(
        "/api/v1/analyses",
        json={"cve": DRIVER_CVE, "asset_id": host, "state": "under_investigation"},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    viewer = _client(service, "inventory:read", name="viewer")
    for path in (f"/assets/{host}", f"/advisories/{DRIVER_CVE}"):
        page = _page(viewer, path)
        # the analysis is shown, with nothing to change it
        assert "under investigation" in _row(page, "by root")
        assert "/analyses" not in page.replace("/api/v1/analyses", "")
        assert 'class="triage"' not in page and "Withdraw" not in page
    for path, form in (
        (f"/assets/{host}/analyses", {"cve": DRIVER_CVE, **GOOD}),
        (f"/advisories/{DRIVER_CVE}/analyses", {"asset_id": str(host), **GOOD}),
        (f"/analyses/{made.json()['id']}/withdraw", {}),
    ):
        answer = _post(viewer, path, form)
        assert answer.status_code == 403, path
        assert "needs a token with the triage scope" in _text(answer.text)
    assert [r.author for r in _stored(service)] == ["root"]


def test_an_analysis_withdrawn_from_its_finding(
    service: Service,
    analyst: TestClient,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    host = fleet[HOST]
    recorded = _record_asset(
        analyst, host, DRIVER_CVE, state="under_investigation", justification=""
    )
    assert recorded.status_code == 303
    (row,) = _stored(service)
    page = _page(analyst, f"/assets/{host}?advisory_status=all")
    action = f'action="/analyses/{row.id}/withdraw"'
    assert action in page
    form = page.split(action, 1)[1].split("</form>", 1)[0]
    found = re.search(r'name="next" value="([^"]+)"', form)
    assert found is not None
    back = html.unescape(found.group(1))
    assert back == f"/assets/{host}?advisory_status=all#vulnerabilities"
    answer = _post(analyst, f"/analyses/{row.id}/withdraw", {"next": back})
    assert answer.status_code == 303 and answer.headers["location"] == back
    assert _stored(service) == []
    (event,) = _events(service, "analysis.delete")
    assert (event.actor, event.source, event.target) == ("alice", "web", f"analysis:{row.id}")
    text = _text(_page(analyst, f"/assets/{host}?advisory_status=all"))
    assert (
        f"Withdrew analysis {row.id}: {DRIVER_CVE} under investigation for asset {host}, by alice."
        in text
    )
    assert "Analyses written for this asset" not in text
    # gone: a second withdrawal finds nothing; a next pointing off the site is refused
    assert _post(analyst, f"/analyses/{row.id}/withdraw", {}).status_code == 404
    assert _record_asset(analyst, host, DRIVER_CVE).status_code == 303
    (again,) = _stored(service)
    evil = _post(analyst, f"/analyses/{again.id}/withdraw", {"next": "https://evil.example/"})
    assert evil.status_code == 400 and len(_stored(service)) == 1


def test_the_advisory_page_records_per_asset_and_by_label_selector(
    service: Service,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    host = fleet[HOST]
    admin = _client(service, "admin", name="root")
    page = _page(admin, f"/advisories/{DRIVER_CVE}")
    assert f'action="/advisories/{DRIVER_CVE}/analyses"' in page
    assert f'name="asset_id" value="{host}"' in page
    assert 'name="selector"' in page  # an admin writes label selectors
    answer = _post(
        admin,
        f"/advisories/{DRIVER_CVE}/analyses",
        {"asset_id": str(host), "state": "fixed", "detail": "driver 535.274.02 rolled out"},
    )
    assert answer.status_code == 303, answer.text[-400:]
    assert answer.headers["location"] == f"/advisories/{DRIVER_CVE}#assets"
    page = _page(admin, f"/advisories/{DRIVER_CVE}")
    text = _text(page)
    assert f"{DRIVER_CVE} fixed for {HOST}, by root" in text
    assert "fixed not trusted driver 535.274.02 rolled out by root" in _row(page, HOST)
    selector = {"selector": "env = prod\nrack=r12\n", **GOOD, "expires": "2099-06-30"}
    answer = _post(admin, f"/advisories/{DRIVER_CVE}/analyses", selector)
    assert answer.status_code == 303, answer.text[-400:]
    rows = _stored(service)
    assert [(r.asset_id, r.selector) for r in rows] == [
        (host, None),
        (None, {"env": "prod", "rack": "r12"}),
    ]
    assert rows[1].expires_at is not None and rows[1].expires_at.isoformat().startswith(
        "2099-06-30T00:00:00"
    )
    page = _page(admin, f"/advisories/{DRIVER_CVE}")
    listed = _text(page).split(f"Analyses of {DRIVER_CVE} (2)", 1)[1]
    assert "labels env=prod rack=r12" in listed and "until 2099-06-30 00:00 UTC" in listed
    assert (
        f"{DRIVER_CVE} not affected (vulnerable code not in execute path) for the assets "
        "labelled env=prod, rack=r12" in _text(page)
    )
    # refused: a line that is no label, no target, both targets
    for form, message in (
        ({"selector": "env"}, "selector: line 'env' is not label=value"),
        ({"selector": ""}, "selector: name 1 to 20 labels"),
        ({}, "asset_id: give exactly one of asset_id and selector"),
        ({"asset_id": str(host), "selector": "env=prod"}, "asset_id: give exactly one"),
        ({"asset_id": "12a"}, "asset_id: give an asset's id"),
    ):
        answer = _post(admin, f"/advisories/{DRIVER_CVE}/analyses", {**form, **GOOD})
        assert answer.status_code == 422, (form, answer.text[-300:])
        assert f"The analysis was not stored: {message}" in _text(answer.text), form
    assert len(_stored(service)) == 2
    # an advisory no document names has no page, so no form
    missing = _post(admin, "/advisories/CVE-1999-0001/analyses", {"asset_id": str(host), **GOOD})
    assert missing.status_code == 404


def _teams(service: Service, fleet: dict[str, int]) -> None:  # noqa: F811
    """Team ml owns the vulnerable host, team ops the toolkit image."""
    with service.db.transaction(write=True) as session:
        for team in ("ml", "ops"):
            put_team(session, team, check_team({"labels": {"team": team}}), cli_actor())
        assign_labels(session, fleet[HOST], {"team": "ml"}, cli_actor())
        assign_labels(session, fleet[IMAGE], {"team": "ops"}, cli_actor())


def test_a_teams_analyst_triages_only_the_teams_assets(
    service: Service,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    _teams(service, fleet)
    host, image = fleet[HOST], fleet[IMAGE]
    admin = auth(service.token("admin", name="root"))
    theirs = service.client.post(
        "/api/v1/analyses",
        json={"cve": TOOLKIT_CVE, "asset_id": image, "state": "under_investigation"},
        headers=admin,
    ).json()["id"]
    everyone = service.client.post(
        "/api/v1/analyses",
        json={"cve": DRIVER_CVE, "selector": {"env": "prod"}, "state": "under_investigation"},
        headers=admin,
    ).json()["id"]
    ml = _client(service, "inventory:read", "triage", name="ml-analyst", team="ml")
    # its own asset: the form, and the analysis stored
    assert f'action="/assets/{host}/analyses"' in _page(ml, f"/assets/{host}")
    assert _record_asset(ml, host, DRIVER_CVE).status_code == 303
    # another team's asset: not found, as the API answers, whatever the form holds
    _page(ml, f"/assets/{image}", 404)
    for path, form in (
        (f"/assets/{image}/analyses", {"cve": TOOLKIT_CVE, **GOOD}),
        (f"/assets/{image}/analyses", {"cve": TOOLKIT_CVE, "state": "bogus"}),
        (f"/advisories/{TOOLKIT_CVE}/analyses", {"asset_id": str(image), **GOOD}),
        (f"/advisories/{TOOLKIT_CVE}/analyses", {"asset_id": str(image), "state": "bogus"}),
        (f"/analyses/{theirs}/withdraw", {}),
    ):
        answer = _post(ml, path, form)
        assert answer.status_code == 404, (path, form, answer.status_code)
        assert "ops" not in answer.text and IMAGE not in answer.text
    # a label selector names assets of every team: no such form, and refused when posted
    page = _page(ml, f"/advisories/{DRIVER_CVE}")
    assert 'name="selector"' not in page
    assert f'action="/analyses/{everyone}/withdraw"' not in page  # shown, not withdrawable
    assert "labels env=prod" in _text(page)
    refused = _post(ml, f"/advisories/{DRIVER_CVE}/analyses", {"selector": "env=prod", **GOOD})
    assert refused.status_code == 403 and "label selector" in _text(refused.text)
    assert _post(ml, f"/analyses/{everyone}/withdraw", {}).status_code == 403
    assert [(r.author, r.asset_id) for r in _stored(service)] == [
        ("root", image),
        ("root", None),
        ("ml-analyst", host),
    ]
    # an analyst in no team sees the whole fleet: selectors too
    unteamed = _client(service, "inventory:read", "triage", name="bob")
    assert 'name="selector"' in _page(unteamed, f"/advisories/{DRIVER_CVE}")
    answer = _post(unteamed, f"/analyses/{everyone}/withdraw", {})
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/advisories/{DRIVER_CVE}#analyses"


def test_a_trusted_authors_analysis_says_the_gate_counts_it(
    service: Service,
    fleet: dict[str, int],  # noqa: F811
) -> None:
    settings = service.settings.model_copy(update={"vex_trusted_authors": "alice"})
    with TestClient(create_app(settings)) as app:
        with service.db.transaction(write=True) as session:
            secret = create_token(session, "alice", ["inventory:read", "triage"]).secret
        assert login(app, secret).status_code == 303
        image = fleet[IMAGE]
        answer = _record_asset(app, image, TOOLKIT_CVE)
        assert answer.status_code == 303
        page = _page(app, f"/assets/{image}")
        assert "its author is trusted: the gate and compliance count it" in _text(page)
        finding = _row(page, TOOLKIT_CVE)
        assert "trusted" in finding and "not trusted" not in finding


def test_a_signed_in_analyst_is_the_author(service: Service, fleet: dict[str, int]) -> None:  # noqa: F811
    issuer = "http://127.0.0.1:9/op"
    settings = Settings(
        database_url=service.url,
        environment="test",
        dashboard_cache_seconds=0,
        secret_key="triage-person-tests-0123456789",
        allow_loopback_issuers=True,
        oidc_issuer=issuer,
        oidc_client_id="gpuprov",
        oidc_redirect_url="http://127.0.0.1/login/sso/callback",
        oidc_roles={"analysts": "analyst", "viewers": "viewer"},
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        for role, email in ((Role.VIEWER, "vera@example.com"), (Role.ANALYST, "ann@example.com")):
            with service.db.transaction(write=True) as session:
                started = users.sign_in(
                    session,
                    issuer,
                    {"sub": f"p-{uuid.uuid4().hex}", "email": email, "name": email},
                    role,
                    "id-token",
                    utcnow(),
                    3600,
                    groups=[f"{role.value}s"],
                )
            client.cookies.set(PERSON_COOKIE, started.cookie)
            answer = _record_asset(client, fleet[HOST], DRIVER_CVE)
            assert answer.status_code == (303 if role is Role.ANALYST else 403), email
    (row,) = _stored(service)
    assert (row.author, row.source) == ("ann@example.com", "web")
    (event,) = _events(service, "analysis.put")
    assert (event.actor, event.source, event.actor_issuer) == ("ann@example.com", "web", issuer)


def test_an_expiry_beyond_the_year_9999_in_utc_is_refused_by_the_api_too(
    service: Service,
) -> None:
    """The check the form shows is the domain's: the API answers it with 422 (before, storing
    it overflowed: a 500)."""
    answer = service.client.post(
        "/api/v1/analyses",
        json={
            "cve": DRIVER_CVE,
            "selector": {"env": "prod"},
            "state": "under_investigation",
            "expires": "9999-12-31T23:00:00-05:00",
        },
        headers=auth(service.token("admin")),
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"] == [
        {"pointer": "/expires", "message": "lies beyond the year 9999 in UTC"}
    ]
    assert _stored(service) == []
