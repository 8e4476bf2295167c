"""Section 7 of the service issue: each bad input gets a precise 4xx and stores nothing,
on both databases."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.app import boms
from tests.app.conftest import JSON_HEADERS, Service, auth

NOTHING = {
    "artifact": 0,
    "package": 0,
    "raw_bom": 0,
    "asset_library": 0,
    "asset_label": 0,
    "scan": 0,
    "asset": 0,
}


def _without_hash() -> bytes:
    bom = boms.gpuprov_bom()
    del bom["components"][2]["hashes"]
    return boms.encode(bom)


def _duplicate_refs() -> bytes:
    bom = boms.gpuprov_bom()
    bom["components"][4]["bom-ref"] = bom["components"][1]["bom-ref"]
    return boms.encode(bom)


def _spec(version: str) -> bytes:
    bom = boms.gpuprov_bom()
    bom["specVersion"] = version
    return boms.encode(bom)


def _deep() -> bytes:
    return (
        b'{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":'
        + b'{"components":' * 5000
        + b"[]"
        + b"}" * 5001
        + b"}}"
    )


def _nul() -> bytes:
    bom = boms.gpuprov_bom()
    bom["metadata"]["component"]["name"] = "image\u0000name"
    return boms.encode(bom)


CASES = {
    "malformed JSON": (b'{"bomFormat": "CycloneDX", "specVersion": ', 422, "malformed JSON"),
    "not CycloneDX": (json.dumps({"spdxVersion": "SPDX-2.3"}).encode(), 422, "not a CycloneDX"),
    "JSON but not an object": (b"[1, 2, 3]", 422, "not a CycloneDX"),
    "unsupported spec version": (_spec("1.3"), 422, "unsupported CycloneDX specVersion '1.3'"),
    "file component without hashes": (_without_hash(), 422, "must carry a SHA-256 hash"),
    "duplicate bom-refs": (_duplicate_refs(), 422, "duplicate bom-ref"),
    "deep nesting": (_deep(), 422, "nesting deeper than 64"),
    "NUL in a name": (_nul(), 422, "NUL character"),
    "empty body": (b"", 422, "empty"),
    "schema violation": (
        json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "version": "one"}).encode(),
        422,
        "CycloneDX 1.6 schema",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_report(case: str, service: Service, post_report: Callable[..., Any]) -> None:
    body, status, fragment = CASES[case]
    answer = post_report(body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert fragment in error["message"]
    assert error["status"] == status
    assert service.stored() == NOTHING


def test_schema_errors_carry_pointers(service: Service, post_report: Callable[..., Any]) -> None:
    bom = boms.gpuprov_bom()
    bom["components"][1]["type"] = "shared-object"
    answer = post_report(boms.encode(bom))
    assert answer.status_code == 422
    assert answer.json()["error"]["details"][0]["pointer"] == "/components/1/type"
    assert service.stored() == NOTHING


def test_100_megabyte_body(service: Service) -> None:
    writer = service.token("report:write")
    body = b" " * (100 * 1024 * 1024)
    answer = service.client.post(
        "/api/v1/reports", content=body, headers=auth(writer, **JSON_HEADERS)
    )
    assert answer.status_code == 413
    assert "52428800 bytes" in answer.json()["error"]["message"]
    assert service.stored() == NOTHING


def test_streamed_body_over_the_limit(service: Service) -> None:
    writer = service.token("report:write")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while reading
        for _ in range(51):
            yield b" " * (1024 * 1024)

    answer = service.client.post(
        "/api/v1/reports", content=chunks(), headers=auth(writer, **JSON_HEADERS)
    )
    assert answer.status_code == 413
    assert service.stored() == NOTHING


def test_gzip_bomb(service: Service) -> None:
    writer = service.token("report:write")
    bomb = gzip.compress(b" " * (60 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 100_000
    answer = service.client.post(
        "/api/v1/reports",
        content=bomb,
        headers=auth(writer, **JSON_HEADERS, **{"Content-Encoding": "gzip"}),
    )
    assert answer.status_code == 413
    assert "decompressed" in answer.json()["error"]["message"]
    assert service.stored() == NOTHING


@pytest.mark.parametrize(
    ("headers", "status", "fragment"),
    [
        ({"Content-Type": "application/xml"}, 415, "'application/xml' is not accepted"),
        ({"Content-Type": "text/plain"}, 415, "is not accepted"),
        ({}, 415, "'(none)'"),
        ({**JSON_HEADERS, "Content-Encoding": "br"}, 415, "Content-Encoding 'br'"),
        ({**JSON_HEADERS, "Content-Encoding": "gzip"}, 400, "not valid gzip"),
    ],
)
def test_transport_problems(
    service: Service, headers: dict[str, str], status: int, fragment: str
) -> None:
    writer = service.token("report:write")
    answer = service.client.post(
        "/api/v1/reports", content=boms.encode(boms.gpuprov_bom()), headers=auth(writer, **headers)
    )
    assert answer.status_code == status
    assert fragment in answer.json()["error"]["message"]
    assert service.stored() == NOTHING


def test_data_after_the_gzip_stream(service: Service) -> None:
    writer = service.token("report:write")
    body = gzip.compress(boms.encode(boms.gpuprov_bom())) + b"trailing"
    answer = service.client.post(
        "/api/v1/reports",
        content=body,
        headers=auth(writer, **JSON_HEADERS, **{"Content-Encoding": "gzip"}),
    )
    assert answer.status_code == 400 and "after the end" in answer.json()["error"]["message"]
    assert service.stored() == NOTHING


def test_bad_label_parameter(service: Service, post_report: Callable[..., Any]) -> None:
    answer = post_report(boms.encode(boms.gpuprov_bom()), label=["no-equals-sign"])
    assert answer.status_code == 400 and "KEY=VALUE" in answer.json()["error"]["message"]
    answer = post_report(boms.encode(boms.gpuprov_bom()), label=["bad key=x"])
    assert answer.status_code == 400 and "label key" in answer.json()["error"]["message"]
    assert service.stored() == NOTHING


def test_serial_reused_with_other_content(
    service: Service, post_report: Callable[..., Any]
) -> None:
    serial = "urn:uuid:1b4e28ba-2fa1-11d2-883f-0016d3cca427"
    first = post_report(boms.encode(boms.gpuprov_bom(serial=serial)))
    assert first.status_code == 201
    before = service.stored()
    changed = boms.gpuprov_bom(serial=serial, owners=[boms.cudnn_wheel("9.5.1.17")])
    answer = post_report(boms.encode(changed))
    assert answer.status_code == 409
    assert "already ingested with different content" in answer.json()["error"]["message"]
    assert service.stored() == before


HOSTILE = [
    "<script>alert(1)</script>",
    "'; DROP TABLE asset; --",
    "{{7*7}} ${jndi:ldap://x/a}",
    "../../../etc/passwd",
    '=HYPERLINK("http://x")',
    "\u202etxt.exe",
    "名前 🚀 \\x00 %s%n",
]


def test_hostile_strings_are_data(service: Service, post_report: Callable[..., Any]) -> None:
    name = "registry.example.com/" + HOSTILE[0]
    lib = boms.Lib(
        path="/opt/" + "/".join(HOSTILE[1:4]) + "/libcudnn_ops.so.9",
        family="cudnn",
        component="cudnn_ops",
        version="9.1.0.70",
        notes=tuple(HOSTILE),
    )
    bom = boms.gpuprov_bom(name=name, owners=[], extra_libs=[lib])
    answer = post_report(boms.encode(bom), label=[f"team={HOSTILE[4]}"])
    assert answer.status_code == 201, answer.text
    reader = service.token("inventory:read")
    asset = service.client.get(answer.json()["asset_url"], headers=auth(reader)).json()
    assert asset["name"] == name
    assert asset["labels"]["team"] == HOSTILE[4]
    assert asset["libraries"][0]["path"] == lib.path
    assert asset["libraries"][0]["notes"] == HOSTILE
    listed = service.client.get(
        "/api/v1/assets", params={"name": name}, headers=auth(reader)
    ).json()
    assert [a["name"] for a in listed["items"]] == [name]
    exported = service.client.get("/api/v1/inventory/export", headers=auth(reader)).json()
    assert exported[0]["path"] == lib.path and exported[0]["asset_name"] == name
    assert service.count("asset") == 1  # and the tables are still there
