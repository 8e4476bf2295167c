"""The admin policy form takes the policy's name from its document (issue 18 §6: it asked for
the name the YAML already holds)."""

from __future__ import annotations

from html import unescape

from tests.app.conftest import Service, auth
from tests.app.pages import login, session_csrf

DOCUMENT = (
    "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: {name}\nrules:\n  ownership: {{}}\n"
)


def _versions(service: Service, admin: str, name: str) -> list[int]:
    answer = service.client.get(f"/api/v1/policies/{name}/history", headers=auth(admin))
    if answer.status_code == 404:
        return []
    return sorted(v["version"] for v in answer.json()["items"])


def test_the_document_names_the_policy(service: Service) -> None:
    client = service.client
    client.cookies.clear()
    admin = service.token("admin")
    assert login(client, admin).status_code == 303
    form = client.get("/admin/policies").text
    assert 'name="name"' not in form and 'name="document"' in form
    csrf = session_csrf(client)
    stored = client.post(
        "/admin/policies", data={"csrf_token": csrf, "document": DOCUMENT.format(name="edge")}
    )
    assert stored.status_code == 200 and "Stored edge version 1." in stored.text
    assert _versions(service, admin, "edge") == [1]
    # editing a policy shows which; the document's name decides where a version goes
    editing = client.get("/admin/policies?name=edge").text
    assert "Editing <strong>edge</strong>" in editing and "name: edge" in unescape(editing)
    moved = client.post(
        "/admin/policies", data={"csrf_token": csrf, "document": DOCUMENT.format(name="core")}
    )
    assert moved.status_code == 200 and "Stored core version 1." in moved.text
    assert _versions(service, admin, "edge") == [1]
    # a name field an older form still posts is no second source of the name
    stale = client.post(
        "/admin/policies",
        data={"csrf_token": csrf, "name": "edge", "document": DOCUMENT.format(name="core") + "\n"},
    )
    assert "Stored core version 2." in stale.text and _versions(service, admin, "edge") == [1]
    # without a name, or not a policy at all: the reason, the document kept, nothing stored
    for document in (
        DOCUMENT.replace("name: {name}\n", "").format(),
        "rules: [",
        DOCUMENT.format(name="bad name"),
    ):
        refused = client.post("/admin/policies", data={"csrf_token": csrf, "document": document})
        assert refused.status_code == 422, (document, refused.status_code)
        assert 'class="error"' in refused.text
        assert document.split("\n")[0] in unescape(refused.text)
    assert _versions(service, admin, "edge") == [1] and _versions(service, admin, "core") == [1, 2]
    client.cookies.clear()
