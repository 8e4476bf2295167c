"""The OpenAPI document says exactly what the service does (issue 17): a parameter value the
document allows is never refused as a bad request and one it forbids always is; a caller learns
that it is not authenticated (401) or not allowed (403) before anything about its parameters or
body; a 405 names every method of the path in ``Allow``.

The values are a corpus of edge cases for every rule the parameters carry (patterns, lengths,
formats, enums); the document decides each with jsonschema-rs (ECMA-262 regular expressions,
formats checked), the service by answering. The schemathesis run (test_schemathesis.py) draws
random values on top of these.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema_rs
import pytest

from app.domain.tokens import Scope
from tests.app import boms
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.app.test_gate_api import POLICY, put_policy

DIGEST = "sha256:" + "a" * 64
#: path parameters, filled with values of stored rows (the first asset, the policy "prod")
CONCRETE = {"{asset_id}": "1", "{token_id}": "1", "{name}": "prod", "{control_id}": "CIS-2.6"}
#: what an operation needs besides the parameter under test to be a valid request
NEEDS: dict[str, dict[str, str]] = {
    "/api/v1/where-used": {"family": "cudnn"},
    "/api/v1/compliance": {"policy": "prod"},
    "/api/v1/compliance/controls/{control_id}": {"policy": "prod"},
    "/api/v1/compliance/export": {"policy": "prod"},
    "/api/v1/compliance/attestation": {"policy": "prod"},
    "/api/v1/gate/diff": {"from": DIGEST, "to": DIGEST},
}
_NOW = datetime.now(UTC)
#: values at the edges of the parameters' rules
CORPUS = [
    *("", " ", "a", "a ", " a", "a b", "A", "\u00e9", "\u3000a", "a\u0085", "\u2028"),
    *("x=y", "=y", "k=", "k=v=w", "-k=v", "k.k/k-k_1=v v", "k=v\u0001", "k=v\u0085", "k=\t"),
    *("bad key=x", "k" * 128 + "=v", "k" * 129 + "=v", "k=" + "v" * 256, "k=" + "v" * 257),
    *("0.5", "1e3", "-1", "1", "2026-01-01", "2026-01-01T00:00:00", "2026-01-01 00:00:00Z"),
    *("2026-01-01T00:00:00Z", "2026-01-01t00:00:00.123456789z", "2026-12-31T23:59:60Z"),
    *("2026-02-30T00:00:00Z", "2026-01-01T00:00:00+24:00", "0001-01-01T00:00:00+01:00"),
    *("0000-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00"),
    *("5m", " 5m", "5m ", "05m", "0m", "5", "m", "522w", "523w", "3660d", "3661d", "87840h"),
    *("87841h", "9999999s", "10000000s", "5270400m", "5270401m"),
    *(DIGEST, DIGEST.upper(), "a" * 64, "A" * 64, DIGEST + "\n", "a" * 64 + "\n", DIGEST[:-1]),
    *("sha256:", "SHA256:x", "sha25", "sha256x", "reg.example/app:1"),
    *("9.1.0", "9.1.*", ">=9.0,<9.2", " >= 9.0 , < 9.2 ", "v9", "==9.1", "==abc", ">=abc"),
    *("9,", ",9", ".*", ".5", "=x", "9.1.0.70-1+cuda12.4", "unknown", "9" * 129),
    *("cudnn", "x" * 64, "x" * 65, "x" * 200, "x" * 201, "CIS-2.6", "*", "a*b"),
    *("token.create", "policy.put", "nope", "image", "host", "verified", "conflict"),
    *("true", "false", "csv", "json", "original", "normalized", "cis-v8", "allow"),
]


@pytest.fixture
def admin(service: Service, post_report: Callable[..., Any]) -> str:
    """An admin token of a service holding one report and the policy "prod"."""
    assert post_report(boms.encode(boms.gpuprov_bom())).status_code == 201
    put_policy(service, POLICY)
    return service.token("admin")


def _operations(service: Service) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in service.client.app.openapi()["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def _concrete(path: str) -> str:
    for name, value in CONCRETE.items():
        path = path.replace(name, value)
    return path


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return bool(jsonschema_rs.validator_for(schema, validate_formats=True).is_valid(value))


def test_query_values_are_refused_exactly_where_the_document_refuses(
    service: Service, admin: str
) -> None:
    mismatches: list[str] = []
    seen: set[str] = set()  # each rule once: the same schema on another operation is one check
    for method, path, operation in _operations(service):
        if method != "get":
            continue
        for parameter in operation.get("parameters", []):
            schema, name = parameter["schema"], parameter["name"]
            if parameter["in"] != "query" or parameter.get("required"):
                continue
            string = schema.get("type") == "string"
            strings = schema.get("type") == "array" and schema["items"].get("type") == "string"
            rule = json.dumps(
                {k: v for k, v in schema.items() if k not in ("title", "description")}
            )
            if not (string or strings) or rule in seen:
                continue
            seen.add(rule)
            for value in CORPUS:
                expected = _valid(schema, [value] if strings else value)
                params = {**NEEDS.get(path, {}), name: value}
                answer = service.client.get(_concrete(path), params=params, headers=auth(admin))
                accepted = answer.status_code not in (400, 422)
                assert answer.status_code < 500, (path, name, value, answer.text)
                if accepted != expected:
                    mismatches.append(
                        f"{path} {name}={value!r}: document {expected}, "
                        f"service {answer.status_code} {answer.text[:160]}"
                    )
    # patterns, lengths, enums and formats of 15 distinct rules or more were tried
    assert len(seen) >= 15 and mismatches == []


#: token request fields at the edges of their rules (expiry values whose form is right are all
#: in the future and within 3660 days: whether they are is the format's meaning, not checked
#: by a validator)
TOKEN_FIELDS: dict[str, list[Any]] = {
    "name": ["ci", "ci runner", " ci", "ci ", "", "n" * 128, "n" * 129, "tab\there", "\u00e9"],
    "scopes": [[], ["gate"], ["gate", "gate"], ["root"], [""], ["admin", "report:write"]],
    "assets": [[], ["gpu-*"], [" gpu"], [""], ["a\x1b"], ["x" * 1024], ["x" * 1025]],
    "expires": [
        None,
        "30d",
        "3660d",
        "522w",
        "87840h",
        "0d",
        " 30d",
        "30 d",
        "3661d",
        (_NOW + timedelta(days=30)).date().isoformat(),
        (_NOW + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        (_NOW + timedelta(days=30)).strftime("%Y-%m-%dt%H:%M:%S.5+02:00"),
        (_NOW + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M"),
        (_NOW + timedelta(days=30)).strftime("%Y%m%d"),
        "1e3",
    ],
    "policies": [[], ["prod"], ["-x"], [""], ["p" * 128], ["p" * 129], ["a b"]],
    "unknown": ["x"],
}


def test_token_requests_are_refused_exactly_where_the_document_refuses(
    service: Service, admin: str
) -> None:
    operation = service.client.app.openapi()["paths"]["/api/v1/tokens"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    mismatches = []
    for field, values in TOKEN_FIELDS.items():
        for value in values:
            scopes = {"assets": ["report:write"], "policies": ["gate"]}.get(field, ["gate"])
            body = {"name": "t", "scopes": scopes, field: value}
            answer = service.client.post("/api/v1/tokens", json=body, headers=auth(admin))
            assert answer.status_code in (201, 422), answer.text
            if (answer.status_code == 201) != _valid(schema, body):
                mismatches.append(f"{field}={value!r}: {answer.status_code} {answer.text[:160]}")
    # asset patterns without the report:write scope, policy limits without gate or with admin:
    # refused by both
    for scopes, extra in (
        (["gate"], {"assets": ["gpu-*"]}),
        (["inventory:read"], {"policies": ["prod"]}),
        (["gate", "admin"], {"policies": ["prod"]}),
        (["admin"], {"team": "ml"}),
        (["inventory:read", "policy:write"], {"team": "ml"}),
    ):
        body = {"name": "t", "scopes": scopes, **extra}
        assert not _valid(schema, body), body
        answer = service.client.post("/api/v1/tokens", json=body, headers=auth(admin))
        assert answer.status_code == 422, body
    assert mismatches == []


def _other_scope(needed: str) -> str:
    return next(s.value for s in Scope if s.value not in (needed, Scope.ADMIN.value))


def test_authentication_comes_before_parameters_and_body(service: Service, admin: str) -> None:
    """An unauthenticated caller learns 401 and a caller without the scope 403, whatever its
    query, path and body: the query rules ran first (a 400 about an unknown parameter), and
    FastAPI parsed the token request's body first (a 422 about its JSON)."""
    checked = 0
    for method, path, operation in _operations(service):
        scopes = [s for r in operation.get("security", []) for s in r.get("HTTPBearer", [])]
        if not scopes:
            continue
        concrete = path
        for name in CONCRETE:
            concrete = concrete.replace(name, "0" if name.endswith("id}") else "-bad name-")
        params = {"bogus": "1", "limit": "0", "since": "0.5", "label": "no equals"}
        for token, status in ((None, 401), (service.token(_other_scope(scopes[0])), 403)):
            answer = service.client.request(
                method.upper(),
                concrete,
                params=params,
                content=b"{not json",
                headers=auth(token, **JSON_HEADERS) if token else JSON_HEADERS,
            )
            assert answer.status_code == status, (method, path, token, answer.text)
            checked += 1
    assert checked >= 2 * 30
    # the dashboard's pages: to the login form, not a 400 about the query
    for page in ("/assets?bogus=1", "/assets/0?page=0", "/decisions?per_page=0", "/admin/tokens?x"):
        answer = service.client.get(page, follow_redirects=False)
        assert answer.status_code == 303 and "/login" in answer.headers["location"], page


def test_405_names_every_method_of_the_path(service: Service, admin: str) -> None:
    """Starlette named only the methods of the first route whose path matched (GET for
    /api/v1/tokens, whose POST is another route)."""
    checked = 0
    for path, item in service.client.app.openapi()["paths"].items():
        documented = {m.upper() for m in item}
        for method in {"DELETE", "GET", "PATCH", "POST", "PUT"} - documented:
            answer = service.client.request(method, _concrete(path), headers=auth(admin))
            assert answer.status_code == 405, (method, path)
            allow = {m.strip() for m in answer.headers["allow"].split(",")}
            assert allow == documented, (method, path, answer.headers["allow"])
            checked += 1
    assert checked >= 60


def _maps_without_example(node: Any, where: str, shown: bool, found: list[str]) -> None:
    """Schemas of maps (an object whose keys are data) that no example covers: a renderer
    invents keys for them (``property1``, ``additionalProp1``)."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            _maps_without_example(item, f"{where}/{i}", shown, found)
        return
    if not isinstance(node, dict):
        return
    shown = shown or "example" in node or "examples" in node
    is_map = node.get("type") == "object" and not node.get("properties")
    if is_map and node.get("additionalProperties", False) is not False and not shown:
        found.append(where)
    for key, value in node.items():
        if key not in ("example", "examples"):
            _maps_without_example(value, f"{where}/{key}", shown, found)


def _examples(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(where, schema, example) of every example a schema or a media type carries."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _examples(item, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    schema = node["schema"] if "schema" in node and isinstance(node["schema"], dict) else node
    if "example" in node:
        yield where, schema, node["example"]
    if isinstance(node.get("examples"), list):
        for example in node["examples"]:
            yield where, schema, example
    elif isinstance(node.get("examples"), dict):  # a media type's named examples
        for name, example in node["examples"].items():
            yield f"{where}/{name}", schema, example.get("value")
    for key, value in node.items():
        if key not in ("example", "examples"):
            yield from _examples(value, f"{where}/{key}")


def test_every_example_in_the_document_is_real(service: Service) -> None:
    """Issue 18 §6: /healthz showed ``property1``/``property2`` (a renderer's invention for a
    map without an example). Every map a schema describes carries an example, and every
    example the document holds is valid under the schema it illustrates."""
    document = service.client.app.openapi()  # type: ignore[attr-defined]
    unshown: list[str] = []
    _maps_without_example(document["paths"], "#/paths", False, unshown)
    _maps_without_example(document["components"], "#/components", False, unshown)
    assert unshown == [], unshown
    for path, item in document["paths"].items():  # what a client sends: shown as it is sent
        for method, operation in item.items():
            for media, content in operation.get("requestBody", {}).get("content", {}).items():
                schema = content.get("schema", {})
                free = schema.get("type") == "object" and not schema.get("properties")
                if free and "example" not in content and "examples" not in content:
                    unshown.append(f"{method} {path} {media}")
    assert unshown == [], unshown
    examples = list(_examples(document, "#"))
    assert len(examples) >= 10
    invalid = []
    for where, schema, example in examples:
        rooted = {**schema, "components": document["components"]}
        if not jsonschema_rs.validator_for(rooted, validate_formats=True).is_valid(example):
            invalid.append(f"{where}: {json.dumps(example)[:120]}")
    assert invalid == [], invalid
    # the BOM the document shows is one the service takes, sent alone or to the gate
    report = document["paths"]["/api/v1/reports"]["post"]["requestBody"]["content"]
    token = service.token("admin")
    for media, content in report.items():
        answer = service.client.post(
            "/api/v1/reports",
            content=json.dumps(content["example"]),
            headers=auth(token, **{"Content-Type": media}),
        )
        assert answer.status_code in (200, 201), (media, answer.text)
    put_policy(service, POLICY)
    gate = document["paths"]["/api/v1/gate"]["post"]["requestBody"]["content"]
    bom = gate["application/json"]["examples"]["bom"]["value"]
    answer = service.client.post("/api/v1/gate", json=bom, headers=auth(token))
    assert answer.status_code == 200 and answer.json()["decision"] in ("allow", "warn", "deny")
    health = document["paths"]["/healthz"]["get"]["responses"]["200"]["content"]
    assert service.client.get("/healthz").json() == {"status": "ok"}
    assert health["application/json"]["schema"] == {"$ref": "#/components/schemas/Health"}


def test_every_reference_of_the_document_resolves() -> None:
    """A request body declared by hand (``openapi_extra``) must not carry a model's own
    ``#/$defs/`` references: they point nowhere in the OpenAPI document (ReDoc refuses it)."""
    from app.main import create_app
    from app.settings import Settings

    doc = create_app(Settings(database_url="sqlite://", environment="test")).openapi()
    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    schemas = doc["components"]["schemas"]
    bad = [r for r in refs if not r.startswith("#/components/schemas/")]
    bad += [r for r in refs if r.removeprefix("#/components/schemas/") not in schemas]
    assert refs and not bad, sorted(set(bad))
