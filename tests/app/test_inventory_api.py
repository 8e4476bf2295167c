"""Inventory queries on both databases: assets, libraries, where-used, drift, exports."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

import scanner
from tests.app import boms
from tests.app.conftest import Service, auth


@pytest.fixture
def fleet(service: Service, post_report: Callable[..., Any]) -> dict[str, Any]:
    """Three images and two hosts with different cuDNN versions and labels."""
    tampered = boms.Lib(
        path=f"{boms.SITE}/cudnn/lib/libcudnn_graph.so.9",
        family="cudnn",
        component="cudnn_graph",
        version="9.1.0.70",
        sha256="f" * 64,
        integrity="modified",
    )
    wheel_without_graph = boms.cudnn_wheel()
    wheel_without_graph.libs = [lib for lib in wheel_without_graph.libs if "graph" not in lib.path]
    specs = {
        "train": boms.gpuprov_bom(name="registry.example.com/ml/train:1.0"),
        "serve": boms.gpuprov_bom(
            name="registry.example.com/ml/serve:2.0",
            owners=[boms.cudnn_wheel("9.5.1.17"), *boms.cuda_wheels()],
        ),
        "legacy": boms.gpuprov_bom(
            name="registry.example.com/legacy/app:0.9",
            owners=[boms.cudnn_wheel("8.9.7.29", cuda=11)],
        ),
        "node1": boms.gpuprov_bom(kind="host", name="gpu-node-1", machine_id="a1"),
        "node2": boms.gpuprov_bom(
            kind="host",
            name="gpu-node-2",
            machine_id="a2",
            owners=[wheel_without_graph],
            extra_libs=[tampered],
        ),
    }
    labels = {
        "train": ["env=prod", "team=ml"],
        "serve": ["env=prod"],
        "legacy": ["env=dev"],
        "node1": ["env=prod", "cluster=east"],
        "node2": ["env=prod", "cluster=west"],
    }
    ids = {}
    for key, bom in specs.items():
        answer = post_report(boms.encode(bom), label=labels[key])
        assert answer.status_code == 201, answer.text
        ids[key] = answer.json()["asset_id"]
    return {"ids": ids, "token": service.token("inventory:read"), "tampered": tampered}


def _get(service: Service, fleet: dict[str, Any], path: str, **params: Any) -> Any:
    answer = service.client.get(path, params=params, headers=auth(fleet["token"]))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _names(items: list[dict[str, Any]], key: str = "name") -> list[str]:
    return sorted(i[key] if key in i else i["asset"][key] for i in items)


def test_asset_filters(service: Service, fleet: dict[str, Any]) -> None:
    def names(**params: Any) -> list[str]:
        return _names(_get(service, fleet, "/api/v1/assets", **params)["items"])

    assert len(names()) == 5
    assert names(kind="host") == ["gpu-node-1", "gpu-node-2"]
    assert names(name="registry.example.com/ml/*") == [
        "registry.example.com/ml/serve:2.0",
        "registry.example.com/ml/train:1.0",
    ]
    assert names(label=["env=prod", "cluster=west"]) == ["gpu-node-2"]
    assert names(family="cudnn", version="8") == ["registry.example.com/legacy/app:0.9"]
    assert names(family="cudnn", version=">=9.2") == ["registry.example.com/ml/serve:2.0"]
    assert names(verdict="modified") == ["gpu-node-2"]
    assert names(name="nothing*") == []
    # a version without a family matches any library of that version (it was ignored)
    assert names(version="8") == ["registry.example.com/legacy/app:0.9"]
    assert names(version="9.5.1") == ["registry.example.com/ml/serve:2.0"]
    # integrity and provenance are separate filters; verdict matches either
    assert names(integrity="modified") == ["gpu-node-2"]
    assert names(integrity="modified", provenance="unknown") == ["gpu-node-2"]
    assert names(provenance="verified") == []
    # labels: all must match, a key given twice with two values matches nothing
    assert names(label=["env=prod", "env=dev"]) == []
    assert names(label=["env=prod", "env=prod"]) == names(label=["env=prod"])


def test_pagination(service: Service, fleet: dict[str, Any]) -> None:
    pages = [_get(service, fleet, "/api/v1/assets", limit=2, offset=o) for o in (0, 2, 4)]
    assert [p["total"] for p in pages] == [5, 5, 5]
    assert [len(p["items"]) for p in pages] == [2, 2, 1]
    assert len({a["id"] for p in pages for a in p["items"]}) == 5
    bad = service.client.get("/api/v1/assets?limit=0", headers=auth(fleet["token"]))
    assert bad.status_code == 400 and bad.json()["error"]["details"][0]["pointer"] == "/query/limit"


def test_asset_detail_and_missing_asset(service: Service, fleet: dict[str, Any]) -> None:
    detail = _get(service, fleet, f"/api/v1/assets/{fleet['ids']['node2']}")
    assert detail["labels"] == {"env": "prod", "cluster": "west"}
    assert len(detail["libraries"]) == 8 and len(detail["history"]) == 1
    missing = service.client.get("/api/v1/assets/999999", headers=auth(fleet["token"]))
    assert missing.status_code == 404


def test_libraries_aggregate(service: Service, fleet: dict[str, Any]) -> None:
    items = _get(service, fleet, "/api/v1/libraries", family="cudnn")["items"]
    rows = {(i["version"], i["cuda_major"]): i for i in items}
    assert list(rows) == [("8.9.7.29", 11), ("9.1.0.70", 12), ("9.5.1.17", 12)]
    assert (rows["9.1.0.70", 12]["assets"], rows["9.1.0.70", 12]["images"]) == (3, 1)
    assert rows["9.1.0.70", 12]["hosts"] == 2
    assert rows["9.1.0.70", 12]["files"] == 24
    everything = _get(service, fleet, "/api/v1/libraries", limit=2)
    assert everything["total"] == 7 and len(everything["items"]) == 2


def test_where_used_by_version(service: Service, fleet: dict[str, Any]) -> None:
    used = _get(service, fleet, "/api/v1/where-used", family="cudnn", version="9.1.0")
    assert used["total"] == 3
    assert _names(used["items"]) == [
        "gpu-node-1",
        "gpu-node-2",
        "registry.example.com/ml/train:1.0",
    ]
    node1 = next(i for i in used["items"] if i["asset"]["name"] == "gpu-node-1")
    assert sorted(lib["path"] for lib in node1["libraries"]) == sorted(
        lib.path for lib in boms.cudnn_wheel().libs
    )
    hosts = _get(service, fleet, "/api/v1/where-used", family="cudnn", version="9.1.0", kind="host")
    assert hosts["total"] == 2
    ranged = _get(service, fleet, "/api/v1/where-used", family="cudnn", version=">=8,<9.2")
    assert ranged["total"] == 4
    page = _get(service, fleet, "/api/v1/where-used", family="cudnn", limit=1, offset=1)
    assert page["total"] == 5 and len(page["items"]) == 1
    # a version alone (it answered 400) and the verdict filters, all applied together
    alone = _get(service, fleet, "/api/v1/where-used", version="9.5.1")
    assert _names(alone["items"]) == ["registry.example.com/ml/serve:2.0"]
    assert {lib["version"] for lib in alone["items"][0]["libraries"]} == {"9.5.1.17"}
    modified = _get(service, fleet, "/api/v1/where-used", integrity="modified")
    assert _names(modified["items"]) == ["gpu-node-2"]
    assert [lib["path"] for lib in modified["items"][0]["libraries"]] == [fleet["tampered"].path]
    both = _get(service, fleet, "/api/v1/where-used", family="cudnn", provenance="verified")
    assert both["total"] == 0


def test_where_used_by_digest(service: Service, fleet: dict[str, Any]) -> None:
    digest = boms.cudnn_wheel().libs[3].digest()
    used = _get(service, fleet, "/api/v1/where-used", sha256=digest.upper())
    assert _names(used["items"]) == [
        "gpu-node-1",
        "gpu-node-2",
        "registry.example.com/ml/train:1.0",
    ]
    assert all(len(i["libraries"]) == 1 for i in used["items"])
    tampered = _get(service, fleet, "/api/v1/where-used", sha256="sha256:" + "f" * 64)
    assert _names(tampered["items"]) == ["gpu-node-2"]


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"sha256": "abc"}, "64 hexadecimal"),
        ({"family": "cudnn", "version": ">=x"}, "version:"),
        ({}, "give at least one of family"),
        ({"provenance": "modified"}, "provenance must be one of verified, conflict, unknown"),
        ({"integrity": "conflict"}, "integrity must be one of"),
        ({"verdict": "ok"}, "verdict must be one of"),
    ],
)
def test_where_used_bad_queries(
    service: Service, fleet: dict[str, Any], params: dict[str, str], fragment: str
) -> None:
    answer = service.client.get("/api/v1/where-used", params=params, headers=auth(fleet["token"]))
    assert answer.status_code == 400 and fragment in answer.json()["error"]["message"]


def test_drift(service: Service, fleet: dict[str, Any], post_report: Callable[..., Any]) -> None:
    # gpu-node-1 is rescanned: cuDNN upgraded, NCCL removed
    rescanned = boms.gpuprov_bom(
        kind="host",
        name="gpu-node-1",
        machine_id="a1",
        timestamp="2026-12-01T00:00:00Z",
        owners=[boms.cudnn_wheel("9.5.1.17"), *boms.cuda_wheels()[:2]],
    )
    assert post_report(boms.encode(rescanned)).status_code == 201
    drift = _get(service, fleet, "/api/v1/drift")
    conflicts = drift["digest_conflicts"]
    assert len(conflicts) == 1
    conflict = conflicts[0]
    assert (conflict["family"], conflict["component"], conflict["version"]) == (
        "cudnn",
        "cudnn_graph",
        "9.1.0.70",
    )
    by_digest = {d["sha256"]: d["assets"] for d in conflict["digests"]}
    assert by_digest == {"f" * 64: 1, boms.cudnn_wheel().libs[1].digest(): 1}
    changes = drift["asset_changes"]["items"]
    assert [c["asset_id"] for c in changes] == [fleet["ids"]["node1"]]
    change = changes[0]
    assert [r["path"] for r in change["removed"]] == [f"{boms.SITE}/nccl/lib/libnccl.so.2"]
    assert change["added"] == []
    assert len(change["changed"]) == 8
    assert {(c["from"]["version"], c["to"]["version"]) for c in change["changed"]} == {
        ("9.1.0.70", "9.5.1.17")
    }
    spread = {s["family"]: s for s in drift["version_spread"]}
    assert spread["cudnn"]["distinct_versions"] == 3
    assert {v["version"]: v["assets"] for v in spread["cudnn"]["versions"]} == {
        "8.9.7.29": 1,
        "9.1.0.70": 2,
        "9.5.1.17": 2,
    }


def test_export_json_and_csv(service: Service, fleet: dict[str, Any]) -> None:
    rows = _get(service, fleet, "/api/v1/inventory/export")
    assert len(rows) == 12 + 12 + 8 + 12 + 8
    assert {r["asset_name"] for r in rows} >= {"gpu-node-2", "registry.example.com/ml/train:1.0"}
    answer = service.client.get(
        "/api/v1/inventory/export", params={"format": "csv"}, headers=auth(fleet["token"])
    )
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(answer.text)))
    assert len(table) == len(rows)
    assert {(r["asset_name"], r["path"], r["sha256"]) for r in table} == {
        (r["asset_name"], r["path"], r["sha256"]) for r in rows
    }


def test_export_of_an_empty_inventory(service: Service) -> None:
    reader = service.token("inventory:read")
    assert service.client.get("/api/v1/inventory/export", headers=auth(reader)).json() == []


def test_normalized_sbom_is_valid_cyclonedx(service: Service, fleet: dict[str, Any]) -> None:
    answer = service.client.get(
        f"/api/v1/assets/{fleet['ids']['node2']}/sbom",
        params={"format": "normalized"},
        headers=auth(fleet["token"]),
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/vnd.cyclonedx+json"
    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(answer.text)
    assert errors is None, errors
    bom = json.loads(answer.text)
    files = [c for c in bom["components"] if c["type"] == "file"]
    assert len(files) == 8
    props = {p["name"]: p["value"] for p in bom["metadata"]["component"]["properties"]}
    assert props["gpuprov:host:machine-id"] == "a2"
    assert props["gpuprov:label:cluster"] == "west"
    tampered = next(f for f in files if f["hashes"][0]["content"] == "f" * 64)
    assert {"name": "gpuprov:integrity", "value": "modified"} in tampered["properties"]


@pytest.mark.parametrize(
    ("reference", "repository", "tag"),
    [
        # a registry port is part of the repository, never a tag (it was read as name "localhost")
        ("localhost:5000/ml/train@sha256:" + "ab" * 32, "localhost:5000/ml/train", None),
        ("registry.example.com/ml/train:1.0", "registry.example.com/ml/train", "1.0"),
    ],
)
def test_normalized_sbom_names_the_image_by_its_repository(
    service: Service,
    post_report: Callable[..., Any],
    reference: str,
    repository: str,
    tag: str | None,
) -> None:
    bom = boms.gpuprov_bom(name=reference, digest="sha256:" + "ab" * 32)
    posted = post_report(boms.encode(bom))
    assert posted.status_code == 201, posted.text
    answer = service.client.get(
        f"/api/v1/assets/{posted.json()['asset_id']}/sbom",
        params={"format": "normalized"},
        headers=auth(service.token("inventory:read")),
    )
    assert answer.status_code == 200
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(answer.text) is None
    normalized = json.loads(answer.text)
    purl = PackageURL.from_string(normalized["metadata"]["component"]["purl"])
    assert (purl.type, purl.name, purl.version) == ("oci", "train", "sha256:" + "ab" * 32)
    assert purl.qualifiers == {
        "repository_url": repository,
        "arch": "amd64",
        **({"tag": tag} if tag else {}),
    }
    # the service's own version, not a number written by hand
    assert normalized["metadata"]["tools"]["components"] == [
        {"type": "application", "name": "gpuprov-service", "version": scanner.__version__}
    ]
    # owner packages keep their purls; each file hangs under its owner package
    packages = {c["bom-ref"]: c for c in normalized["components"] if c["type"] == "library"}
    assert packages and all(ref == c["purl"] for ref, c in packages.items())
    owned = {d["ref"]: d.get("dependsOn", []) for d in normalized["dependencies"]}
    assert all(owned[ref] for ref in packages)


def test_normalized_sbom_keeps_a_purl_it_cannot_parse_as_the_reference(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Another tool's malformed purl (a qualifier without '=') is stored as reported; the rebuilt
    BOM keeps it as the component's bom-ref instead of answering 500."""
    bom = boms.trivy_bom()
    broken = "pkg:deb/ubuntu/libcudnn9-cuda-12@9.1.0.70-1?arch"
    cudnn = bom["components"][0]
    assert cudnn["name"] == "libcudnn9-cuda-12"
    cudnn["purl"] = cudnn["bom-ref"] = broken
    posted = post_report(boms.encode(bom))
    assert posted.status_code == 201, posted.text
    answer = service.client.get(
        f"/api/v1/assets/{posted.json()['asset_id']}/sbom",
        params={"format": "normalized"},
        headers=auth(service.token("inventory:read")),
    )
    assert answer.status_code == 200, answer.text
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(answer.text) is None
    kept = [c for c in json.loads(answer.text)["components"] if c["bom-ref"] == broken]
    assert len(kept) == 1 and "purl" not in kept[0]


def test_sbom_of_another_assets_scan_is_not_found(service: Service, fleet: dict[str, Any]) -> None:
    other = _get(service, fleet, f"/api/v1/assets/{fleet['ids']['node1']}")["latest_scan"]["id"]
    answer = service.client.get(
        f"/api/v1/assets/{fleet['ids']['node2']}/sbom",
        params={"scan_id": other},
        headers=auth(fleet["token"]),
    )
    assert answer.status_code == 404


def test_csv_export_of_hostile_names_reads_back_row_for_row(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Issue 17: a cell holding only CR went out unquoted, and a spreadsheet began a new row
    there with a formula; every cell now reads back as stored, none as a formula."""
    from tests.app.test_tabular import FORMULA_STARTS, spreadsheet_rows

    hostile = ["\r=1+2", "a\rb\nc", "@SUM(A1)", "-1+2", '"q",x']
    libs = [
        boms.Lib(
            path=f"/opt/{value}/libcudnn_ops.so.9",
            family="cudnn",
            component="cudnn_ops",
            version="9.1.0.70",
            sha256=boms.digest_of(value),
        )
        for value in hostile
    ]
    name = '=HYPERLINK("http://x")'
    bom = boms.gpuprov_bom(kind="host", name=name, owners=[], extra_libs=libs)
    answer = post_report(boms.encode(bom))
    assert answer.status_code == 201, answer.text
    reader = auth(service.token("inventory:read"))
    text = service.client.get(
        "/api/v1/inventory/export", params={"format": "csv"}, headers=reader
    ).text
    table = list(csv.DictReader(io.StringIO(text, newline="")))
    assert sorted(r["path"] for r in table) == sorted(lib.path for lib in libs)
    assert {r["asset_name"] for r in table} == {"'" + name}
    rows = spreadsheet_rows(text)
    assert len(rows) == 1 + len(libs) and all(len(r) == len(rows[0]) for r in rows)
    assert [c for r in rows for c in r if c.startswith(FORMULA_STARTS)] == []
