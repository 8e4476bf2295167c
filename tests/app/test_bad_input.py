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
    "library_digest": 0,
    "library_version": 0,
    "asset_file_verdicts": 0,
    "node_container": 0,
    "node_gpu": 0,
    "node_injected": 0,
    "asset_condition": 0,
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
    # read as SPDX since issue 21: refused naming what SPDX lacks
    "SPDX without its parts": (
        json.dumps({"spdxVersion": "SPDX-2.3"}).encode(),
        422,
        "no valid SPDX 2: Error while parsing document None: ['CreationInfo does not exist.']",
    ),
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


# Section 5 of issue 7: every value of a report that reaches a column is checked against the
# column at parse time, the same on both databases; (body, status, message fragment, pointer).


def _edited(edit: Callable[[dict[str, Any]], None], bom: dict[str, Any] | None = None) -> bytes:
    bom = bom if bom is not None else boms.gpuprov_bom()
    edit(bom)
    return boms.encode(bom)


def _set_property(component: dict[str, Any], name: str, value: str) -> None:
    properties = component.setdefault("properties", [])
    for prop in properties:
        if prop["name"] == name:
            prop["value"] = value
            return
    properties.append({"name": name, "value": value})


def _cudnn_owner_purl(purl: str) -> Callable[[dict[str, Any]], None]:
    def edit(bom: dict[str, Any]) -> None:
        # the cuDNN wheel (component 8) with another purl: a GPU package stored on its own
        bom["components"][8]["purl"] = purl

    return edit


def _syft_file(name: str) -> bytes:
    bom = boms.syft_bom()
    bom["components"][1]["name"] = name
    return boms.encode(bom)


def _trivy_purl(purl: str) -> bytes:
    bom = boms.trivy_bom()
    bom["components"][0]["purl"] = purl
    return boms.encode(bom)


def _timestamp(value: str) -> bytes:
    return boms.encode(boms.gpuprov_bom(timestamp=value))


def _file_property(name: str, value: str) -> bytes:
    return _edited(lambda bom: _set_property(bom["components"][0], name, value))


def _asset_property(name: str, value: str, kind: str = "image") -> bytes:
    bom = boms.gpuprov_bom(kind=kind)
    _set_property(bom["metadata"]["component"], name, value)
    return boms.encode(bom)


def _raw_version(literal: bytes) -> bytes:
    body = boms.encode(boms.gpuprov_bom())
    assert body.count(b'"version": 1,') == 1
    return body.replace(b'"version": 1,', b'"version": ' + literal + b",")


def _file_props_pointer(name: str) -> str:
    props = boms.file_component(boms.cudnn_wheel().libs[0])["properties"]
    index = [p["name"] for p in props].index(name) if name in [p["name"] for p in props] else None
    return f"/components/0/properties/{index if index is not None else len(props)}/value"


_UTF8 = boms.encode(boms.gpuprov_bom())
VALUE_CASES: dict[str, tuple[bytes, int, str, str]] = {
    "timestamp near year 1 with an offset": (
        _timestamp("0001-01-01T00:30:00+05:00"),
        422,
        "metadata.timestamp",
        "/metadata/timestamp",
    ),
    "timestamp near year 9999 with an offset": (
        _timestamp("9999-12-31T23:00:00-05:00"),
        422,
        "metadata.timestamp",
        "/metadata/timestamp",
    ),
    "timestamp before 1970": (
        _timestamp("1969-12-31T23:59:59Z"),
        422,
        "before 1970-01-01",
        "/metadata/timestamp",
    ),
    "timestamp in 9999": (
        _timestamp("9999-12-30T00:00:00Z"),
        422,
        "clock skew",
        "/metadata/timestamp",
    ),
    "BOM version 10^20": (_raw_version(b"1" + b"0" * 20), 422, "bom version", "/version"),
    "BOM version 2^31": (_raw_version(str(2**31).encode()), 422, "bom version", "/version"),
    "integer of 5,000 digits": (_raw_version(b"9" * 5000), 422, "5000 digits", ""),
    "NaN": (_raw_version(b"NaN"), 422, "NaN", ""),
    "float overflow": (_raw_version(b"1e999"), 422, "out of range", ""),
    "5,000-digit purl version": (
        _edited(_cudnn_owner_purl("pkg:pypi/nvidia-cudnn-cu12@" + "9" * 5000)),
        422,
        "version",
        "/components/8/purl",
    ),
    "purl version over varchar(128)": (
        _edited(_cudnn_owner_purl("pkg:pypi/nvidia-cudnn-cu12@" + "9." * 70 + "1")),
        422,
        "version",
        "/components/8/purl",
    ),
    "purl type over 32 characters": (
        _trivy_purl("pkg:" + "x" * 33 + "/libcudnn9-cuda-12@9.1.0.70-1"),
        422,
        "manager",
        "/components/0/purl",
    ),
    "CUDA major of 2^31 in a purl": (
        _trivy_purl(f"pkg:deb/ubuntu/libcudnn9-cuda-{2**31}@9.1.0.70-1"),
        422,
        "out of range",
        "/components/0/purl",
    ),
    "libcudart.so.99999999999999999999.1": (
        _syft_file("/usr/lib/libcudart.so.99999999999999999999.1"),
        422,
        "out of range",
        "/components/1/name",
    ),
    "libcudart with a 5,000-digit major": (
        _syft_file("/usr/lib/libcudart.so." + "9" * 5000 + ".1"),
        422,
        "5000 digits",
        "/components/1/name",
    ),
    "file version over varchar(128)": (
        _syft_file("/usr/lib/libcudnn_ops.so.9." + "1." * 70 + "1"),
        422,
        "version",
        "/components/1/name",
    ),
    "UTF-16 body": (json.dumps(boms.gpuprov_bom()).encode("utf-16"), 422, "UTF-16", ""),
    "UTF-16 body without a byte order mark": (
        json.dumps(boms.gpuprov_bom()).encode("utf-16-le"),
        422,
        "UTF-16",
        "",
    ),
    "encoded surrogate ED A0 80": (
        _UTF8.replace(b"registry.example.com", b"registry\xed\xa0\x80example"),
        422,
        "not UTF-8",
        "",
    ),
    "Latin-1 byte": (_UTF8.replace(b"registry.example.com", b"r\xe9gistry"), 422, "not UTF-8", ""),
    "escaped lone surrogate": (
        _UTF8.replace(b"registry.example.com", b"registry\\udc80example"),
        422,
        "unpaired UTF-16 surrogate",
        "/metadata/component/",
    ),
    "architecture over 32 characters": (
        _file_property("gpuprov:library:arch", "x" * 33),
        422,
        "arch",
        _file_props_pointer("gpuprov:library:arch"),
    ),
    "component over 128 characters": (
        _file_property("gpuprov:library:component", "c" * 129),
        422,
        "component",
        _file_props_pointer("gpuprov:library:component"),
    ),
    "layer over 80 characters": (
        _file_property("gpuprov:layer", "sha256:" + "a" * 74),
        422,
        "layer",
        _file_props_pointer("gpuprov:layer"),
    ),
    "integrity reason over 8192 characters": (
        _file_property("gpuprov:integrity:reason", "r" * 8193),
        422,
        "integrity reason",
        _file_props_pointer("gpuprov:integrity:reason"),
    ),
    "SHA-256 with a trailing newline": (
        _edited(lambda bom: bom["components"][0]["hashes"][0].update(content="a" * 64 + "\n")),
        422,
        "SHA-256",
        "/components/0/hashes",
    ),
    "family with a trailing newline": (
        _file_property("gpuprov:library:family", "cudnn\n"),
        422,
        "family",
        "/components/0/properties",
    ),
    "machine id over 255 characters": (
        _asset_property("gpuprov:host:machine-id", "m" * 256, kind="host"),
        422,
        "identity",
        "/metadata/component/properties/1/value",
    ),
    "image reference over 8192 characters": (
        _asset_property("gpuprov:image:reference", "r" * 8193),
        422,
        "details",
        "/metadata/component/properties/2/value",
    ),
    "finding over 8192 characters": (
        _edited(
            lambda bom: bom["metadata"].update(
                properties=[{"name": "gpuprov:finding", "value": "f" * 8193}]
            )
        ),
        422,
        "findings",
        "/metadata/properties/0/value",
    ),
}


@pytest.mark.parametrize("case", list(VALUE_CASES))
def test_report_value_the_columns_cannot_hold(
    case: str, service: Service, post_report: Callable[..., Any]
) -> None:
    body, status, fragment, pointer = VALUE_CASES[case]
    answer = post_report(body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert fragment in error["message"], error
    if pointer:
        assert error["details"][0]["pointer"].startswith(pointer), error
    assert service.stored() == NOTHING


def test_utf8_byte_order_mark_is_ignored(service: Service, post_report: Callable[..., Any]) -> None:
    answer = post_report(b"\xef\xbb\xbf" + boms.encode(boms.gpuprov_bom()))
    assert answer.status_code == 201, answer.text


@pytest.mark.parametrize("charset", ["utf-16", "iso-8859-1"])
def test_charset_other_than_utf8(service: Service, charset: str) -> None:
    writer = service.token("report:write")
    headers = {"Content-Type": f"application/vnd.cyclonedx+json; charset={charset}"}
    answer = service.client.post(
        "/api/v1/reports", content=boms.encode(boms.gpuprov_bom()), headers=auth(writer, **headers)
    )
    assert answer.status_code == 415 and charset in answer.json()["error"]["message"]
    assert service.stored() == NOTHING
    headers = {"Content-Type": 'application/json; charset="UTF-8"'}
    answer = service.client.post(
        "/api/v1/reports", content=boms.encode(boms.gpuprov_bom()), headers=auth(writer, **headers)
    )
    assert answer.status_code == 201, answer.text


@pytest.mark.parametrize("value", ["a\x00b", "line\nbreak", "\x1b[31mred"])
def test_label_parameter_with_control_characters(
    service: Service, post_report: Callable[..., Any], value: str
) -> None:
    answer = post_report(boms.encode(boms.gpuprov_bom()), label=[f"team={value}"])
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert "control character" in message or "NUL character" in message
    assert service.stored() == NOTHING


def test_values_at_the_column_limits_are_stored(
    service: Service, post_report: Callable[..., Any]
) -> None:
    # the other side of each refusal: a value exactly as long as its column is accepted
    bom = boms.gpuprov_bom()
    _set_property(bom["components"][0], "gpuprov:library:arch", "x" * 32)
    _set_property(bom["components"][0], "gpuprov:library:component", "c" * 128)
    _set_property(bom["components"][0], "gpuprov:integrity:reason", "r" * 8192)
    bom["components"][8]["purl"] = "pkg:pypi/nvidia-cudnn-cu12@" + "9" * 128
    bom["version"] = 2**31 - 1
    answer = post_report(boms.encode(bom))
    assert answer.status_code == 201, answer.text
    reader = service.token("inventory:read")
    asset = service.client.get(answer.json()["asset_url"], headers=auth(reader)).json()
    arches = {lib["arch"] for lib in asset["libraries"]}
    assert "x" * 32 in arches
    assert "9" * 128 in {lib["version"] for lib in asset["libraries"]}
