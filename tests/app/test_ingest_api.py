"""POST /api/v1/reports on both databases: storage, idempotency, latest scan, other tools."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from tests.app import boms
from tests.app.conftest import JSON_HEADERS, Service, auth


def test_report_is_stored(service: Service, post_report: Callable[..., Any]) -> None:
    bom = boms.gpuprov_bom(labels={"team": "vision"})
    answer = post_report(boms.encode(bom), label=["env=prod", "cluster=a"])
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert body["created"] and body["latest"] and body["libraries"] == 12
    assert answer.headers["location"] == body["asset_url"] == f"/api/v1/assets/{body['asset_id']}"
    reader = service.token("inventory:read")
    asset = service.client.get(body["asset_url"], headers=auth(reader)).json()
    assert asset["kind"] == "image" and asset["name"] == bom["metadata"]["component"]["name"]
    assert asset["identity"] == bom["metadata"]["component"]["version"]
    assert asset["labels"] == {"team": "vision", "env": "prod", "cluster": "a"}
    assert asset["latest_scan"]["id"] == body["scan_id"]
    assert asset["latest_scan"]["producer"] == "gpuprov"
    by_path = {lib["path"]: lib for lib in asset["libraries"]}
    lib = boms.cudnn_wheel().libs[1]
    stored = by_path[lib.path]
    assert (stored["family"], stored["component"], stored["version"], stored["cuda_major"]) == (
        "cudnn",
        "cudnn_graph",
        "9.1.0.70",
        12,
    )
    assert stored["sha256"] == lib.digest()
    assert (stored["integrity"], stored["provenance"]) == ("verified", "unknown")
    assert stored["owner_purl"] == boms.cudnn_wheel().purl
    assert {p["purl"] for p in asset["packages"]} >= {boms.cudnn_wheel().purl}
    assert service.stored() == {
        "artifact": 12,
        "package": 4,
        "raw_bom": 1,
        "asset_library": 5,
        # the fleet counts: twelve (library, digest) pairs, five (family, version), one asset
        "library_digest": 12,
        "library_version": 5,
        "asset_file_verdicts": 1,
        "node_container": 0,
        "node_gpu": 0,
        "node_injected": 0,
        "asset_condition": 0,
        "asset_label": 3,
        "scan": 1,
        "asset": 1,
    }


def test_same_report_twice_is_stored_once(
    service: Service, post_report: Callable[..., Any]
) -> None:
    data = boms.encode(boms.gpuprov_bom())
    first = post_report(data)
    writer = service.token("report:write")
    again = service.client.post(
        "/api/v1/reports",
        content=gzip.compress(data),
        headers=auth(writer, **JSON_HEADERS, **{"Content-Encoding": "gzip"}),
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["scan_id"] == first.json()["scan_id"]
    assert again.json()["created"] is False
    assert service.count("scan") == 1 and service.count("artifact") == 12


def test_original_bytes_are_kept(service: Service, post_report: Callable[..., Any]) -> None:
    data = boms.encode(boms.gpuprov_bom()).replace(b"\n", b"\r\n  ")
    asset_id = post_report(data).json()["asset_id"]
    reader = service.token("inventory:read")
    exported = service.client.get(f"/api/v1/assets/{asset_id}/sbom", headers=auth(reader))
    assert exported.status_code == 200
    assert exported.headers["content-type"] == "application/vnd.cyclonedx+json"
    assert exported.content == data


def test_original_bytes_are_kept_from_a_gzip_push(service: Service) -> None:
    data = boms.encode(boms.gpuprov_bom())
    writer, reader = service.token("report:write"), service.token("inventory:read")
    answer = service.client.post(
        "/api/v1/reports",
        content=gzip.compress(data, compresslevel=1),
        headers=auth(writer, **JSON_HEADERS, **{"Content-Encoding": "gzip"}),
    )
    exported = service.client.get(
        f"/api/v1/assets/{answer.json()['asset_id']}/sbom", headers=auth(reader)
    )
    assert exported.content == data


def test_newer_scan_replaces_current_state(
    service: Service, post_report: Callable[..., Any]
) -> None:
    old = boms.gpuprov_bom(timestamp="2026-11-01T00:00:00Z", owners=[boms.cudnn_wheel("9.1.0.70")])
    new = boms.gpuprov_bom(timestamp="2026-11-02T00:00:00Z", owners=[boms.cudnn_wheel("9.5.1.17")])
    first = post_report(boms.encode(old)).json()
    second = post_report(boms.encode(new)).json()
    assert second["latest"] and second["asset_id"] == first["asset_id"]
    reader = service.token("inventory:read")
    asset = service.client.get(second["asset_url"], headers=auth(reader)).json()
    assert {lib["version"] for lib in asset["libraries"]} == {"9.5.1.17"}
    assert [s["id"] for s in asset["history"]] == [second["scan_id"], first["scan_id"]]
    assert service.count("artifact") == 16  # history kept
    with service.db.session() as session:
        current = session.execute(
            text("SELECT count(*) FROM artifact WHERE is_current = :t"), {"t": True}
        ).scalar_one()
        summary = session.execute(text("SELECT version FROM asset_library")).scalars().all()
    assert current == 8 and summary == ["9.5.1.17"]


def test_late_old_report_joins_history_only(
    service: Service, post_report: Callable[..., Any]
) -> None:
    new = boms.gpuprov_bom(timestamp="2026-11-02T00:00:00Z", owners=[boms.cudnn_wheel("9.5.1.17")])
    old = boms.gpuprov_bom(timestamp="2026-11-01T00:00:00Z", owners=[boms.cudnn_wheel("9.1.0.70")])
    current = post_report(boms.encode(new)).json()
    late = post_report(boms.encode(old)).json()
    assert late["created"] and not late["latest"]
    reader = service.token("inventory:read")
    asset = service.client.get(current["asset_url"], headers=auth(reader)).json()
    assert asset["latest_scan"]["id"] == current["scan_id"]
    assert {lib["version"] for lib in asset["libraries"]} == {"9.5.1.17"}
    assert len(asset["history"]) == 2


def test_concurrent_reports_for_one_asset(
    service: Service, post_report: Callable[..., Any]
) -> None:
    days = range(1, 9)
    reports = [
        boms.encode(
            boms.gpuprov_bom(
                timestamp=f"2026-11-{day:02d}T00:00:00Z",
                owners=[boms.cudnn_wheel(f"9.{day}.0.1")],
            )
        )
        for day in days
    ]
    reports += reports[:3]  # and a few exact repeats racing their originals
    answers: list[Any] = []
    barrier = threading.Barrier(len(reports))

    def send(data: bytes) -> None:
        barrier.wait()
        answer = post_report(data)
        for _ in range(100):  # more reports than ingest slots: retried, as agents do
            if answer.status_code != 503:
                break
            time.sleep(0.05)
            answer = post_report(data)
        answers.append(answer)

    threads = [threading.Thread(target=send, args=(r,)) for r in reports]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a.status_code for a in answers) == [200] * 3 + [201] * 8
    assert service.count("scan") == 8
    reader = service.token("inventory:read")
    asset_url = answers[0].json()["asset_url"]
    asset = service.client.get(asset_url, headers=auth(reader)).json()
    assert asset["latest_scan"]["scanned_at"].startswith("2026-11-08")
    assert {lib["version"] for lib in asset["libraries"]} == {"9.8.0.1"}
    assert len(asset["libraries"]) == 8
    with service.db.session() as session:
        versions = session.execute(text("SELECT version FROM asset_library")).scalars().all()
    assert versions == ["9.8.0.1"]


def test_other_tools_reports(service: Service, post_report: Callable[..., Any]) -> None:
    for bom in (boms.trivy_bom(), boms.syft_bom(), boms.cdxgen_bom()):
        answer = post_report(boms.encode(bom))
        assert answer.status_code == 201, answer.text
    reader = service.token("inventory:read")
    used = service.client.get(
        "/api/v1/where-used", params={"family": "cudnn", "version": "9"}, headers=auth(reader)
    ).json()
    names = sorted(item["asset"]["name"] for item in used["items"])
    assert names == [
        "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        "ghcr.io/acme/infer:2.3",
        "nvcr.io/nvidia/pytorch:24.05-py3",
    ]
    producers = {
        a["latest_scan"]["producer"]
        for a in service.client.get("/api/v1/assets", headers=auth(reader)).json()["items"]
    }
    assert producers == {"trivy", "syft", "cdxgen"}


def test_host_reports_keyed_by_machine_id(
    service: Service, post_report: Callable[..., Any]
) -> None:
    first = post_report(boms.encode(boms.gpuprov_bom(kind="host", name="node-a", machine_id="m1")))
    renamed = post_report(
        boms.encode(boms.gpuprov_bom(kind="host", name="node-a2", machine_id="m1"))
    )
    other = post_report(boms.encode(boms.gpuprov_bom(kind="host", name="node-a", machine_id="m2")))
    assert first.json()["asset_id"] == renamed.json()["asset_id"] != other.json()["asset_id"]
    reader = service.token("inventory:read")
    asset = service.client.get(renamed.json()["asset_url"], headers=auth(reader)).json()
    assert asset["name"] == "node-a2"
