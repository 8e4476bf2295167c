"""The dashboard's libraries, drift, compliance, gate decision, policy and admin pages on both
backends: what each shows, filters kept in the URL, a 400/404 page (never a 500) for input that
cannot match, the admin scope and CSRF on every admin form, and report values escaped."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.clock import utcnow
from tests.app import boms, catalogs
from tests.app.conftest import Service, auth
from tests.app.pages import login, session_csrf
from tests.fixtures import keys

XSS_NAME = "<img src=x onerror=alert(1)>"
XSS_PATH = '/opt/"><script>alert(1)</script>/libcudnn.so.9'
POLICY = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules:\n"
TAMPERED = "e" * 64


@pytest.fixture
def client(service: Service) -> Iterator[TestClient]:
    service.client.cookies.clear()
    yield service.client
    service.client.cookies.clear()


def _push(post_report: Callable[..., Any], bom: dict[str, Any], *labels: str) -> int:
    answer = post_report(boms.encode(bom), label=list(labels))
    assert answer.status_code == 201, answer.text
    return int(answer.json()["asset_id"])


def _store_policy(service: Service, rules: str) -> None:
    answer = service.client.put(
        "/api/v1/policies/prod",
        content=POLICY + rules,
        headers=auth(service.token("admin"), **{"Content-Type": "application/yaml"}),
    )
    assert answer.status_code == 201, answer.text


@pytest.fixture
def fleet(service: Service, post_report: Callable[..., Any]) -> dict[str, int]:
    """Two images (prod with a tampered cuDNN file, staging), an XSS-named host scanned twice,
    two policy versions and a gate decision."""
    _store_policy(service, "  ownership: {}\n")
    _store_policy(service, "  ownership: {}\n  integrity: {forbid: [modified]}\n")
    wheel = boms.cudnn_wheel()
    libs = [
        boms.Lib(**{**lib.__dict__, "sha256": TAMPERED, "integrity": "modified"}) if i == 1 else lib
        for i, lib in enumerate(wheel.libs)
    ]
    tampered = boms.Owner(wheel.purl, wheel.name, wheel.version, libs)
    ids = {
        "train": _push(
            post_report, boms.gpuprov_bom(name="acme/train:1", owners=[tampered]), "env=prod"
        ),
        "serve": _push(post_report, boms.gpuprov_bom(name="acme/serve:1"), "env=staging"),
    }
    host = {"kind": "host", "name": XSS_NAME, "machine_id": "a1"}
    evil = boms.Lib(XSS_PATH, "cudnn", "cudnn", "9.1.0.70", sha256="d" * 64)
    _push(post_report, boms.gpuprov_bom(**host, timestamp="2026-11-30T00:00:00Z"), "env=lab")
    ids["host"] = _push(
        post_report,
        boms.gpuprov_bom(**host, extra_libs=[evil], timestamp="2026-12-01T00:00:00Z"),
        "env=lab",
    )
    gate = service.client.post(
        "/api/v1/gate",
        json={"policy": "prod", "image": "sha256:" + boms.digest_of("manifest", "acme/train:1")},
        headers=auth(service.token("gate")),
    )
    assert gate.status_code == 200 and gate.json()["decision"] == "deny", gate.text
    return ids


def _reader(service: Service, client: TestClient) -> None:
    assert login(client, service.token("inventory:read", name="reader")).status_code == 303


def _admin(service: Service, client: TestClient) -> None:
    assert login(client, service.token("admin", name="boss")).status_code == 303


def _ok(client: TestClient, path: str) -> str:
    answer = client.get(path)
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:500])
    assert answer.headers["content-type"].startswith("text/html")
    # without the line-break hints of paths and names (a <wbr> after each slash)
    return answer.text.replace("<wbr>", "")


def test_libraries_where_used_and_search(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    _reader(service, client)
    page = _ok(client, "/libraries?family=cudnn")
    assert "9.1.0.70" in page and "cudart" not in page.split("<tbody>")[1]
    used = _ok(client, "/libraries/where-used?family=cudnn&version=9.1.0.70&label=env%3Dprod")
    assert f'href="/assets/{fleet["train"]}"' in used
    assert f'href="/assets/{fleet["serve"]}"' not in used
    found = _ok(client, f"/libraries/search?q=sha256:{TAMPERED}")
    assert "1 current file with SHA-256" in found and "acme/train:1" in found
    by_name = _ok(client, "/libraries/search?q=libcudnn_graph.so.9")
    assert "3 current files with file name" in by_name  # both images and the host
    assert "acme/train:1" in by_name and "acme/serve:1" in by_name


def test_drift_pages(service: Service, client: TestClient, fleet: dict[str, int]) -> None:
    _reader(service, client)
    conflicts = _ok(client, "/drift")
    assert "cudnn_graph" in conflicts and f"sha256={TAMPERED}" in conflicts
    changes = _ok(client, "/drift/changes")
    assert f'href="/assets/{fleet["host"]}"' in changes
    assert "&lt;img src=x onerror=alert(1)&gt;" in changes
    parity = _ok(client, "/drift/parity?label=env&target=lab&baseline=prod")
    assert "2 labelled" not in parity  # one lab asset, one prod asset
    assert "1 asset labelled <code>env=lab</code>" in parity
    assert "Every library version" in _ok(client, "/drift/parity?target=prod&baseline=staging")


def test_compliance_and_a_failing_control(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    _reader(service, client)
    page = _ok(client, "/compliance")  # the first policy by name
    assert "NIST Cybersecurity Framework 2.0" in page and "CIS Critical Security Controls" in page
    assert "The authenticity and integrity of hardware and software" in page
    only = _ok(client, "/compliance?policy=prod&framework=cis-v8")
    assert "CIS-2.6" in only and "ID.RA-09" not in only
    control = _ok(client, "/compliance/controls/ID.RA-09?policy=prod")
    assert "<blockquote" in control and f'href="/assets/{fleet["train"]}"' in control
    assert "libcudnn_graph.so.9" in control


def _shown_policy(client: TestClient, path: str = "/compliance") -> str:
    page = _ok(client, path)
    chosen = re.search(r'<p class="notice chosen">(.*?)</p>', page, re.S)
    assert chosen is not None, page[:2000]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", chosen.group(1))).strip()


def test_compliance_shows_the_configured_or_most_gated_policy_and_says_why(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    lax = POLICY.replace("name: prod", "name: allowdemo") + "  ownership: {}\n"
    stored = service.client.put(
        "/api/v1/policies/allowdemo",
        content=lax,
        headers=auth(service.token("admin"), **{"Content-Type": "application/yaml"}),
    )
    assert stored.status_code == 201, stored.text
    _reader(service, client)
    # allowdemo is first by name; the gate decided under prod
    assert _shown_policy(client).startswith("Showing policy prod: the policy the gate used most")
    control = _ok(client, "/compliance/controls/PR.PS-05")
    assert "under prod version" in control
    settings = service.client.app.state.settings  # type: ignore[attr-defined]
    try:
        for default, shown in (("allowdemo", "allowdemo"), ("gone", "prod")):
            service.client.app.state.settings = settings.model_copy(  # type: ignore[attr-defined]
                update={"default_policy": default}
            )
            why = _shown_policy(client)
            assert why.startswith(f"Showing policy {shown}:"), why
            if default == "gone":
                assert "The configured default gone is not a stored policy." in why
            else:
                assert "the configured default (GPUPROV_DEFAULT_POLICY)" in why
                assert f"under {shown} version" in _ok(client, "/compliance/controls/CIS-2.3")
    finally:
        service.client.app.state.settings = settings  # type: ignore[attr-defined]
    # asked for by name: that one
    assert _shown_policy(client, "/compliance?policy=prod").endswith(
        "the one asked for. Pick another above."
    )
    # no decision in the last 30 days: the first by name
    with service.db.transaction(write=True) as session:
        session.execute(
            text("UPDATE gate_decision SET decided_at = :old"),
            {"old": utcnow() - timedelta(days=31)},
        )
    assert _shown_policy(client).startswith("Showing policy allowdemo: the first by name")


def test_decisions_and_policies(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    _reader(service, client)
    listing = _ok(client, "/decisions?decision=deny&policy=prod")
    found = re.search(r'href="/decisions/(\d+)"', listing)
    assert found and "acme/train:1" in listing
    assert "acme/train:1" not in _ok(client, "/decisions?decision=allow")
    one = _ok(client, f"/decisions/{found.group(1)}")
    assert "integrity" in one and "ID.RA-09" in one and "prod version 2" in one
    assert "prod" in _ok(client, "/policies")
    versions = _ok(client, "/policies/prod")
    assert "current" in versions and "integrity: {forbid: [modified]}" in versions
    assert "ownership: {}" in _ok(client, "/policies/prod/versions/1")
    diff = _ok(client, "/policies/prod/diff")
    assert '<span class="line-add">+  integrity: {forbid: [modified]}</span>' in diff


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/libraries?family=cudnnn", 400),
        ("/libraries/where-used", 400),
        ("/libraries/where-used?family=cudnn&version=%3E%3Dx", 400),
        ("/libraries/where-used?sha256=zz", 400),  # no digest: it would match nothing
        ("/decisions?subject=sha256:zz", 400),
        ("/libraries/search?q=**", 400),
        ("/drift?family=nope", 400),
        ("/drift/parity?label=env&target=a%0Ab", 400),
        ("/compliance?framework=nope", 400),
        ("/compliance?policy=nope", 404),
        ("/compliance/controls/ID.RA-09?policy=nope", 404),
        ("/compliance/controls/PR.DS-10?policy=prod", 404),
        ("/decisions?decision=maybe", 400),
        ("/decisions/99999999", 404),
        ("/policies/nope", 404),
        ("/policies/prod/versions/9", 404),
        ("/policies/prod/diff?from=1&to=9", 404),
        ("/libraries?page=0", 422),
    ],
)
def test_bad_input_is_a_page_never_a_500(
    service: Service, client: TestClient, fleet: dict[str, int], path: str, status: int
) -> None:
    _reader(service, client)
    answer = client.get(path)
    assert answer.status_code in (status, 400), (path, answer.status_code, answer.text[:300])
    assert answer.headers["content-type"].startswith("text/html"), path


def test_report_values_are_escaped_on_every_page(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    _reader(service, client)
    for path in (
        "/libraries/where-used?family=cudnn&label=env%3Dlab",
        "/libraries/search?q=libcudnn.so.9",
        "/drift/changes",
        "/compliance/controls/CIS-2.6?policy=prod",
    ):
        page = _ok(client, path)
        assert "<img src=x" not in page and "<script>alert" not in page, path
    assert "&lt;img src=x onerror=alert(1)&gt;" in _ok(client, "/drift/changes")
    assert "&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in _ok(
        client, "/libraries/search?q=libcudnn.so.9"
    )


def test_admin_pages_need_the_admin_scope(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    _reader(service, client)
    assert 'href="/admin"' not in _ok(client, "/")
    csrf = session_csrf(client)
    pages = (
        "/admin",
        "/admin/policies",
        "/admin/trust-policy",
        "/admin/catalogs",
        "/admin/ci-trust",
    )
    for path in pages:
        assert client.get(path).status_code == 403, path
    tokens = service.count("api_token")
    for path, form in (
        ("/admin/tokens", {"name": "x", "scope_admin": "1"}),
        ("/admin/policies", {"name": "prod", "document": POLICY + "  ownership: {}\n"}),
        ("/admin/trust-policy", {"document": "version: 1\n"}),
        ("/admin/catalogs", {"catalog": "{}"}),
        ("/admin/tokens/1/revoke", {}),
        ("/admin/ci-trust", CI_RULE_FORM),
        ("/admin/ci-trust/prod/delete", {}),
    ):
        assert client.post(path, data={**form, "csrf_token": csrf}).status_code == 403, path
    assert service.count("api_token") == tokens
    assert service.count("ci_trust_rule") == 0
    assert service.count("promotion_policy") == 2


def test_admin_forms_need_the_csrf_token(service: Service, client: TestClient) -> None:
    # Every admin form and logout, each with a form that the right token makes succeed: without
    # the token, or with another, nothing happens and the answer says why.
    _admin(service, client)
    csrf = session_csrf(client)
    victim = service.token("inventory:read", name="victim")
    victim_id = next(t["id"] for t in _tokens(service) if t["name"] == "victim")
    nvidia = keys.shared("ecdsa", "nvidia")
    catalog = catalogs.signed(
        catalogs.catalog_from_bom(boms.gpuprov_bom(owners=[boms.cudnn_wheel()]), "cudnn"), nvidia
    ).decode()
    forms = [
        ("/admin/tokens", {"name": "x", "scope_gate": "1"}, "api_token"),
        (f"/admin/tokens/{victim_id}/revoke", {"go": "1"}, None),  # a form, even if empty
        ("/admin/policies", {"name": "prod", "document": POLICY + "  ownership: {}\n"}, None),
        ("/admin/trust-policy", {"document": catalogs.policy_yaml(("nvidia", nvidia))}, None),
        ("/admin/catalogs", {"catalog": catalog}, None),
        ("/admin/ci-trust", CI_RULE_FORM, None),
    ]
    tables = ("api_token", "promotion_policy", "trust_policy", "reference_catalog", "ci_trust_rule")
    before = {t: service.count(t) for t in tables}
    for path, form, _ in forms:
        for wrong in ({}, {"csrf_token": ""}, {"csrf_token": "nope"}, {"csrf_token": csrf[:-1]}):
            answer = client.post(path, data={**form, **wrong})
            assert answer.status_code == 403 and "CSRF" in answer.text, (path, wrong)
    assert {t: service.count(t) for t in tables} == before
    assert service.client.get("/api/v1/assets", headers=auth(victim)).status_code == 200
    for path, form, _ in forms:  # the same forms with the session's token are accepted
        answer = client.post(path, data={**form, "csrf_token": csrf})
        assert answer.status_code == 200 and 'class="error"' not in answer.text, (path, answer.text)
    after = {t: service.count(t) for t in tables}
    assert after == {t: n + 1 for t, n in before.items()}
    assert service.client.get("/api/v1/assets", headers=auth(victim)).status_code == 401


#: the CI trust form filled as an admin would (a GitHub rule)
CI_RULE_FORM = {
    "name": "release",
    "issuer": "https://token.actions.githubusercontent.com",
    "claims": "repository_owner_id=1001\nrepository_id = 2002\nref=refs/tags/v*\n",
    "scope_gate": "1",
    "policies": "prod\n",
}


def test_the_ci_trust_page_stores_lists_and_removes_rules(
    service: Service, client: TestClient
) -> None:
    """Issue 20 §4: CI trust rules from the dashboard, checked as the API checks them."""
    _admin(service, client)
    csrf = session_csrf(client)
    assert "No CI trust rule is stored" in _ok(client, "/admin/ci-trust")
    assert "<code>gpuprov-test</code>" in _ok(client, "/admin/ci-trust")
    stored = client.post("/admin/ci-trust", data={**CI_RULE_FORM, "csrf_token": csrf})
    assert stored.status_code == 200 and "Stored CI trust rule release." in stored.text
    rule = service.client.get(
        "/api/v1/ci-trust/release", headers=auth(service.token("admin", name="a"))
    ).json()
    assert rule["claims"] == {
        "repository_owner_id": "1001",
        "repository_id": "2002",
        "ref": "refs/tags/v*",
    }
    assert rule["scopes"] == ["gate"] and rule["policies"] == ["prod"]
    page = _ok(client, "/admin/ci-trust")
    assert "<code>repository_id</code> = <code>2002</code>" in page
    # refused as the API refuses, the form kept with the reason
    for bad, why in (
        ({"claims": "repository_owner_id=1001\n"}, "repository_id"),
        ({"claims": "repository_owner_id=1001\nrepository_id=2002\nrepository=acme/*"}, "globs"),
        ({"claims": "no equals sign"}, "claim=value"),
        ({"scope_gate": ""}, "scopes"),
        ({"name": "bad name"}, "rule name"),
    ):
        answer = client.post("/admin/ci-trust", data={**CI_RULE_FORM, **bad, "csrf_token": csrf})
        assert answer.status_code == 422, (bad, answer.text[:300])
        assert why in answer.text and 'class="error"' in answer.text, bad
    assert service.count("ci_trust_rule") == 1
    removed = client.post("/admin/ci-trust/release/delete", data={"csrf_token": csrf})
    assert removed.status_code == 200 and "Removed CI trust rule release." in removed.text
    assert service.count("ci_trust_rule") == 0
    missing = client.post("/admin/ci-trust/release/delete", data={"csrf_token": csrf})
    assert missing.status_code == 404


def _tokens(service: Service) -> list[dict[str, Any]]:
    answer = service.client.get("/api/v1/tokens", headers=auth(service.token("admin")))
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def test_admin_forms(service: Service, client: TestClient, fleet: dict[str, int]) -> None:
    _admin(service, client)
    csrf = session_csrf(client)
    assert "integrity: {forbid: [modified]}" in _ok(client, "/admin/policies?name=prod")
    stored = client.post(
        "/admin/policies",
        data={"csrf_token": csrf, "name": "prod", "document": POLICY + "  duplicates: {}\n"},
    )
    assert stored.status_code == 200 and "Stored prod version 3." in stored.text
    same = client.post(
        "/admin/policies",
        data={"csrf_token": csrf, "name": "prod", "document": POLICY + "  duplicates: {}\n"},
    )
    assert "nothing stored" in same.text
    refused = client.post(
        "/admin/policies",
        data={"csrf_token": csrf, "name": "prod", "document": POLICY + "  nope: {}\n"},
    )
    assert refused.status_code == 422 and "/rules/nope" in refused.text
    assert service.count("promotion_policy") == 3
    # trust policy: a refusal says why; catalogs need one
    bad = client.post("/admin/trust-policy", data={"csrf_token": csrf, "document": "version: 1\n"})
    assert bad.status_code == 422 and 'class="error"' in bad.text
    no_policy = client.post("/admin/catalogs", data={"csrf_token": csrf, "catalog": "{}"})
    assert no_policy.status_code in (409, 422) and 'class="error"' in no_policy.text
    assert service.count("reference_catalog") == 0
    # tokens: created (secret shown once), refused without a scope, revoked
    made = client.post(
        "/admin/tokens",
        data={"csrf_token": csrf, "name": "ci", "scope_gate": "1", "assets": ""},
    )
    secret = re.search(r'<code class="secret">(gpv_[^<]+)</code>', made.text)
    assert made.status_code == 200 and secret
    assert service.client.get(
        "/api/v1/gate/decisions", headers=auth(secret.group(1))
    ).status_code in (200, 403)
    assert secret.group(1) not in _ok(client, "/admin/tokens")
    none = client.post("/admin/tokens", data={"csrf_token": csrf, "name": "x"})
    assert none.status_code == 400
    token_id = re.findall(r'action="/admin/tokens/(\d+)/revoke"', _ok(client, "/admin/tokens"))
    revoke = client.post(f"/admin/tokens/{token_id[-1]}/revoke", data={"csrf_token": csrf})
    assert revoke.status_code == 200 and "Revoked token" in revoke.text


def _audit(service: Service, action: str) -> list[dict[str, Any]]:
    answer = service.client.get(
        f"/api/v1/audit?action={action}", headers=auth(service.token("admin", name="auditor"))
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def test_a_policy_form_stores_audits_and_evaluates_only_a_new_version(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    _admin(service, client)
    csrf = session_csrf(client)
    reader = auth(service.token("inventory:read"))
    document = POLICY + "  duplicates: {}\n"
    stored = client.post(
        "/admin/policies", data={"csrf_token": csrf, "name": "prod", "document": document}
    )
    assert "Stored prod version 3." in stored.text
    assert [e["target"] for e in _audit(service, "policy.put")][:1] == ["policy:prod@3"]
    detail = service.client.get(f"/api/v1/assets/{fleet['train']}", headers=reader).json()
    (before,) = detail["compliance"]
    assert before["policy"]["version"] == 3  # evaluated in the request, under the new version
    # the same document again: nothing stored, audited or evaluated
    audits = len(_audit(service, "policy.put"))
    same = client.post(
        "/admin/policies", data={"csrf_token": csrf, "name": "prod", "document": document}
    )
    assert "is already this document: nothing stored" in same.text
    assert len(_audit(service, "policy.put")) == audits
    detail = service.client.get(f"/api/v1/assets/{fleet['train']}", headers=reader).json()
    assert detail["compliance"][0]["evaluated_at"] == before["evaluated_at"]


def test_on_a_large_fleet_the_forms_evaluate_after_the_answer(
    service: Service, client: TestClient, fleet: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.domain import compliance
    from tests.app import catalogs

    monkeypatch.setattr(compliance, "SYNC_ASSETS", 0)  # every fleet is "large"
    _admin(service, client)
    csrf = session_csrf(client)
    reader = auth(service.token("inventory:read"))
    stored = client.post(
        "/admin/policies",
        data={"csrf_token": csrf, "name": "prod", "document": POLICY + "  duplicates: {}\n"},
    )
    assert "Stored prod version 3." in stored.text
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["policy"]["version"] == 3
    assert summary["assets"]["outdated"] == 0 and summary["assets"]["evaluated"] >= 3
    # a trust policy on a large fleet with policies and a catalog: the catalog's verdicts are
    # verified again, the fleet evaluated after the answer, and the page says so
    admin = auth(service.token("admin"))
    nvidia = keys.shared("ecdsa", "nvidia")
    put = service.client.put(
        "/api/v1/trust-policy",
        content=catalogs.policy_yaml(("nvidia", nvidia)),
        headers={**admin, **catalogs.YAML},
    )
    assert put.status_code == 201, put.text
    golden = catalogs.catalog_from_bom(boms.gpuprov_bom(owners=[boms.cudnn_wheel()]), "cudnn")
    imported = service.client.post(
        "/api/v1/catalogs",
        content=catalogs.signed(golden, nvidia),
        headers={**admin, "Content-Type": "application/json"},
    )
    assert imported.status_code == 201, imported.text
    trust = client.post(
        "/admin/trust-policy",
        data={
            "csrf_token": csrf,
            "document": catalogs.policy_yaml(("n", keys.shared("ecdsa", "nvidia"))),
        },
    )
    assert trust.status_code == 200, trust.text
    assert "Fleet compliance is being evaluated again" in trust.text
    # the verdicts changed: evaluated again after the answer, not left "not evaluated"
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"]["outdated"] == 0 and summary["assets"]["evaluated"] >= 3


def test_a_trust_policy_on_a_small_fleet_says_nothing_is_pending(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    from tests.app import catalogs

    _admin(service, client)
    csrf = session_csrf(client)
    trust = client.post(
        "/admin/trust-policy",
        data={
            "csrf_token": csrf,
            "document": catalogs.policy_yaml(("n", keys.shared("ecdsa", "nvidia"))),
        },
    )
    assert "Stored trust policy version 1." in trust.text
    assert "being evaluated again" not in trust.text
    # a second version: the page lists both (it answered 500 once there were two)
    other = catalogs.policy_yaml(("o", keys.shared("ed25519", "other")))
    second = client.post("/admin/trust-policy", data={"csrf_token": csrf, "document": other})
    assert second.status_code == 200 and "Stored trust policy version 2." in second.text
    page = _ok(client, "/admin/trust-policy")
    history = service.client.get(
        "/api/v1/trust-policy/history", headers=auth(service.token("admin"))
    ).json()["items"]
    assert len(history) == 2
    # each digest whole in the page (shortened on screen by the stylesheet)
    assert all(f'title="{v["content_sha256"]}"' in page for v in history)


def test_a_catalog_form_imports_once_and_names_a_refusal_by_the_name_given(
    service: Service, client: TestClient
) -> None:
    from tests.app import catalogs

    nvidia = keys.shared("ecdsa", "nvidia")
    _admin(service, client)
    csrf = session_csrf(client)
    trusted = client.post(
        "/admin/trust-policy",
        data={"csrf_token": csrf, "document": catalogs.policy_yaml(("n", nvidia))},
    )
    assert trusted.status_code == 200
    signed = catalogs.signed(
        catalogs.catalog_from_bom(boms.gpuprov_bom(owners=[boms.cudnn_wheel()]), "cudnn 9.1"),
        nvidia,
    ).decode()
    first = client.post("/admin/catalogs", data={"csrf_token": csrf, "catalog": signed})
    assert first.status_code == 200 and "Imported cudnn 9.1 (8 files)." in first.text
    again = client.post("/admin/catalogs", data={"csrf_token": csrf, "catalog": signed})
    assert again.status_code == 200 and "Already imported: cudnn 9.1 (8 files)." in again.text
    assert service.count("reference_catalog") == 1
    for given, called in (
        (" golden ", "catalog golden"),
        ("", "catalog catalog"),
        ("  ", "catalog catalog"),
    ):
        refused = client.post(
            "/admin/catalogs", data={"csrf_token": csrf, "catalog": "{nope", "name": given}
        )
        assert refused.status_code == 422 and f"{called} is not JSON" in refused.text, given


def test_on_a_large_fleet_a_catalog_imported_by_the_form_is_evaluated_after_the_answer(
    service: Service, client: TestClient, fleet: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.domain import compliance
    from tests.app import catalogs

    monkeypatch.setattr(compliance, "SYNC_ASSETS", 0)  # every fleet is "large"
    _admin(service, client)
    csrf = session_csrf(client)
    reader = auth(service.token("inventory:read"))
    nvidia = keys.shared("ecdsa", "nvidia")
    trust = client.post(
        "/admin/trust-policy",
        data={"csrf_token": csrf, "document": catalogs.policy_yaml(("nvidia", nvidia))},
    )
    assert trust.status_code == 200, trust.text
    golden = catalogs.catalog_from_bom(boms.gpuprov_bom(owners=[boms.cudnn_wheel()]), "cudnn")
    imported = client.post(
        "/admin/catalogs",
        data={"csrf_token": csrf, "catalog": catalogs.signed(golden, nvidia).decode()},
    )
    assert imported.status_code == 200, imported.text
    assert "Imported cudnn" in imported.text
    assert "Fleet compliance is being evaluated again" in imported.text
    # the provenance verdicts changed: the evaluations were cleared, then made again after the
    # answer (not left "not evaluated" until the next change)
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"]["outdated"] == 0 and summary["assets"]["evaluated"] >= 3


def test_a_catalog_form_audits_an_import_once_and_keeps_a_refused_name(
    service: Service, client: TestClient, fleet: dict[str, int]
) -> None:
    from tests.app import catalogs

    _admin(service, client)
    csrf = session_csrf(client)
    nvidia = keys.shared("ecdsa", "nvidia")
    client.post(
        "/admin/trust-policy",
        data={"csrf_token": csrf, "document": catalogs.policy_yaml(("nvidia", nvidia))},
    )
    golden = catalogs.catalog_from_bom(boms.gpuprov_bom(owners=[boms.cudnn_wheel()]), "cudnn")
    signed = catalogs.signed(golden, nvidia).decode()
    first = client.post("/admin/catalogs", data={"csrf_token": csrf, "catalog": signed})
    assert first.status_code == 200 and "Imported cudnn" in first.text
    assert [e["target"] for e in _audit(service, "catalog.import")] == ["catalog:cudnn"]
    again = client.post("/admin/catalogs", data={"csrf_token": csrf, "catalog": signed})
    assert again.status_code == 200 and "Already imported: cudnn" in again.text
    assert [e["target"] for e in _audit(service, "catalog.import")] == ["catalog:cudnn"]
    # a refused catalog: the form comes back with what was posted, its name included
    refused = client.post(
        "/admin/catalogs", data={"csrf_token": csrf, "catalog": "{}", "name": "golden-cudnn"}
    )
    assert refused.status_code == 422 and 'class="error"' in refused.text
    assert '<input name="name" maxlength="200" value="golden-cudnn">' in refused.text
