"""The service's input limits that no other test reaches (docs/limits.md lists every limit and
the test that holds it): deeply nested JSON on every JSON body, the token request's caps, the
trust and promotion policy size caps, and query values past their columns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tests.app import catalogs
from tests.app.conftest import Service, auth
from tests.app.test_auth import Walk

DEEP = b"[" * 100_000 + b"]" * 100_000


def test_deeply_nested_json_bodies_are_refused(
    service: Service, post_report: Callable[..., Any]
) -> None:
    Walk(service, post_report)  # a trust policy, so a catalog import reaches its parser
    admin = service.token("admin")
    client = service.client
    # regression (issue 12): the catalog's DSSE parser raised RecursionError: a 500
    json_type = {"Content-Type": "application/json"}
    answer = client.post("/api/v1/catalogs", content=DEEP, headers=auth(admin, **json_type))
    assert answer.status_code == 422
    assert "nesting deeper than 64 levels" in answer.json()["error"]["message"]
    answer = client.post("/api/v1/gate", content=DEEP, headers=auth(admin, **json_type))
    assert answer.status_code == 422
    assert post_report(DEEP).status_code == 422
    answer = client.post("/api/v1/tokens", content=DEEP, headers=auth(admin, **json_type))
    assert answer.status_code in (400, 422)
    yaml_bomb = b"a: " + b"[" * 100_000
    for path in ("/api/v1/trust-policy", "/api/v1/policies/prod"):
        answer = client.put(path, content=yaml_bomb, headers=auth(admin, **catalogs.YAML))
        assert answer.status_code in (413, 422), (path, answer.text)


def test_token_request_caps(service: Service) -> None:
    admin = service.token("admin")
    for body in (
        {"name": "x" * 129, "scopes": ["gate"]},
        {"name": "x", "scopes": ["gate"] * 17},
        {"name": "x", "scopes": ["g" * 65]},
        {"name": "x", "scopes": ["report:write"], "assets": ["a"] * 101},
        {"name": "x", "scopes": ["report:write"], "assets": ["a" * 1025]},
        {"name": "x", "scopes": ["gate"], "expires": "1" * 65},
    ):
        answer = service.client.post("/api/v1/tokens", json=body, headers=auth(admin))
        assert answer.status_code == 422, body


def test_policy_documents_over_their_caps(service: Service) -> None:
    admin = auth(service.token("admin"), **catalogs.YAML)
    big = b"# " + b"x" * (1024 * 1024) + b"\n"
    answer = service.client.put("/api/v1/trust-policy", content=big, headers=admin)
    assert answer.status_code == 413
    answer = service.client.put("/api/v1/policies/prod", content=big[: 300 * 1024], headers=admin)
    assert answer.status_code == 413


def test_query_values_past_their_columns(service: Service) -> None:
    admin = auth(service.token("admin"))
    for path, param, size in (
        ("/api/v1/audit", "actor", 129),
        ("/api/v1/audit", "target", 1025),
        ("/api/v1/assets", "name", 1025),
        ("/api/v1/gate/decisions", "subject", 1025),
    ):
        answer = service.client.get(path, params={param: "x" * size}, headers=admin)
        assert answer.status_code == 400, (path, param)


def test_every_body_has_a_ceiling(service: Service) -> None:
    """A token request (parsed by FastAPI, which reads any body whole) is refused past 1 MiB,
    declared or streamed, before it is read; the answer carries the usual headers."""
    admin = auth(service.token("admin"), **{"Content-Type": "application/json"})
    big = b'{"name": "x", "scopes": ["gate"], "pad": "' + b"x" * (2 << 20) + b'"}'
    answer = service.client.post("/api/v1/tokens", content=big, headers=admin)
    assert answer.status_code == 413 and "1048576 bytes" in answer.json()["error"]["message"]
    assert answer.headers["x-content-type-options"] == "nosniff"

    def chunks() -> Iterator[bytes]:  # no Content-Length
        yield big[: 1 << 20]
        yield big[1 << 20 :]

    answer = service.client.post("/api/v1/tokens", content=chunks(), headers=admin)
    assert answer.status_code == 413, answer.text
    anonymous = service.client.put(
        "/api/v1/policies/prod", content=b"x" * (2 << 20), headers=catalogs.YAML
    )
    assert anonymous.status_code == 413  # refused before anything reads it, token or not
    assert service.count("api_token") == 1
