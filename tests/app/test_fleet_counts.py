"""The fleet-wide counts kept at ingest (digest conflicts, version spread, verdict shares) on both
databases: equal to the current state recomputed after new assets, rescans that change digests
and versions, late and repeated reports, retention prune, provenance re-evaluation, concurrent
ingests, and as migration 0013 backfills them; the drift API and the overview read them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from alembic import command
from sqlalchemy import text

from app.clock import utcnow
from app.domain.dashboard import overview
from app.http.schemas import Drift
from app.storage.migrate import alembic_config, upgrade
from tests.app import boms
from tests.app.catalogs import YAML, policy_yaml, signed
from tests.app.conftest import Service, auth
from tests.app.fleet_counts import differences, kept, summed
from tests.app.test_cli import _run
from tests.app.test_provenance_api import NVIDIA, golden_cudnn

GRAPH = f"{boms.SITE}/cudnn/lib/libcudnn_graph.so.9"


def _rows(service: Service) -> Callable[[str], list[Any]]:
    def rows(sql: str) -> list[Any]:
        with service.db.session() as session:
            return list(session.execute(text(sql)).all())

    return rows


def _consistent(service: Service) -> dict[str, Any]:
    rows = _rows(service)
    assert differences(rows) == []
    return kept(rows)


def _tampered_graph(sha256: str = "f" * 64) -> boms.Lib:
    return boms.Lib(
        path=GRAPH,
        family="cudnn",
        component="cudnn_graph",
        version="9.1.0.70",
        sha256=sha256,
        integrity="modified",
    )


def _without_graph() -> boms.Owner:
    wheel = boms.cudnn_wheel()
    wheel.libs = [lib for lib in wheel.libs if "graph" not in lib.path]
    return wheel


def _post(post_report: Callable[..., Any], bom: dict[str, Any], status: int = 201) -> Any:
    answer = post_report(boms.encode(bom))
    assert answer.status_code == status, answer.text
    return answer.json()


def _drift(service: Service, token: str, **params: Any) -> Any:
    answer = service.client.get("/api/v1/drift", params=params, headers=auth(token))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    # the answer is its documented model exactly (the route skips re-validating it)
    assert Drift.model_validate(body).model_dump(mode="json", by_alias=True) == body
    return body


def _figures(service: Service) -> dict[str, Any]:
    with service.db.session() as session:
        return overview(session, utcnow())


def _spread(drift: dict[str, Any], family: str) -> dict[str | None, int]:
    entry = next(s for s in drift["version_spread"] if s["family"] == family)
    return {v["version"]: v["assets"] for v in entry["versions"]}


def test_counts_follow_ingest_rescans_and_prune(
    service: Service, post_report: Callable[..., Any]
) -> None:
    reader = service.token("inventory:read")
    empty = _consistent(service)
    assert empty == {"digests": {}, "versions": {}, "verdicts": {}}
    assert _figures(service)["digest_conflicts"] == 0
    train = _post(post_report, boms.gpuprov_bom(name="registry.example.com/ml/train:1.0"))
    _post(
        post_report,
        boms.gpuprov_bom(
            name="registry.example.com/ml/serve:2.0",
            owners=[boms.cudnn_wheel("9.5.1.17"), *boms.cuda_wheels()],
        ),
    )
    node = boms.gpuprov_bom(kind="host", name="gpu-node-1", machine_id="a1")
    _post(post_report, node)
    before = _consistent(service)
    assert _drift(service, reader)["digest_conflicts"] == []
    assert _spread(_drift(service, reader), "cudnn") == {"9.1.0.70": 2, "9.5.1.17": 1}

    # a host whose libcudnn_graph 9.1.0.70 has other bytes: one conflict, two digests
    tampered_host = boms.gpuprov_bom(
        kind="host",
        name="gpu-node-2",
        machine_id="a2",
        owners=[_without_graph()],
        extra_libs=[_tampered_graph()],
        timestamp="2026-11-30T12:00:00Z",
    )
    _post(post_report, tampered_host)
    _consistent(service)
    conflicts = _drift(service, reader)["digest_conflicts"]
    assert [(c["component"], c["version"]) for c in conflicts] == [("cudnn_graph", "9.1.0.70")]
    assert {d["sha256"]: d["assets"] for d in conflicts[0]["digests"]} == {
        "f" * 64: 1,
        boms.cudnn_wheel().libs[1].digest(): 2,
    }
    assert _drift(service, reader, family="cudnn")["digest_conflicts"] == conflicts
    assert _drift(service, reader, family="nccl")["digest_conflicts"] == []
    figures = _figures(service)
    assert figures["digest_conflicts"] == 1
    assert figures["modified"] == {"files": 1, "assets": 1}

    # a later rescan of that host with the vendor's bytes: the conflict and its row go
    _post(
        post_report,
        boms.gpuprov_bom(
            kind="host", name="gpu-node-2", machine_id="a2", timestamp="2026-12-01T00:00:00Z"
        ),
    )
    state = _consistent(service)
    assert not [d for d in state["digests"] if d[5] == "f" * 64]
    assert _drift(service, reader)["digest_conflicts"] == []
    assert _figures(service)["digest_conflicts"] == 0
    assert _figures(service)["modified"] == {"files": 0, "assets": 0}

    # an older report of it arrives late: history only, current state and counts unchanged
    late = dict(tampered_host, serialNumber=boms.gpuprov_bom()["serialNumber"])
    late["metadata"] = {**tampered_host["metadata"], "timestamp": "2026-11-29T00:00:00Z"}
    _post(post_report, late)
    assert _consistent(service) == state
    # a repeated delivery of the latest report changes nothing either
    _post(post_report, node, status=200)
    assert _consistent(service) == state

    # a rescan that moves the training image to cuDNN 9.5.1.17: the version spread follows
    _post(
        post_report,
        boms.gpuprov_bom(
            name="registry.example.com/ml/train:1.0",
            owners=[boms.cudnn_wheel("9.5.1.17"), *boms.cuda_wheels()],
            timestamp="2026-12-01T00:00:00Z",
        ),
    )
    moved = _consistent(service)
    assert _spread(_drift(service, reader), "cudnn") == {"9.1.0.70": 2, "9.5.1.17": 2}
    assert moved["verdicts"][(train["asset_id"],)] == before["verdicts"][(train["asset_id"],)]
    versions = dict(_figures(service)["versions"]["cudnn"])
    assert versions == {"9.1.0.70": 2, "9.5.1.17": 2}

    # retention: `gpuprov db prune` drops history, never current state
    code, _, err = _run("db", "prune", "--keep-scans", "1", "--database-url", service.url)
    assert code == 0, err
    assert "pruned 3 scan(s) of 2 asset(s)" in err, err
    assert _consistent(service) == moved


def test_concurrent_ingests_of_assets_sharing_libraries(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Assets that share every (library, digest) row, reported at once and then rescanned onto
    other versions at once: the shared rows end at the right counts (on PostgreSQL the
    upserts lock them in one order: no deadlock)."""
    names = [f"registry.example.com/ml/worker-{i}:1" for i in range(8)]

    def burst(version: str, timestamp: str) -> list[int]:
        answers: list[int] = []
        barrier = threading.Barrier(len(names))

        def send(name: str) -> None:
            bom = boms.gpuprov_bom(
                name=name,
                owners=[boms.cudnn_wheel(version), *boms.cuda_wheels()],
                timestamp=timestamp,
            )
            barrier.wait()
            answer = post_report(boms.encode(bom))
            for _ in range(200):  # more reports than ingest slots: retried, as agents do
                if answer.status_code != 503:
                    break
                threading.Event().wait(0.05)
                answer = post_report(boms.encode(bom))
            answers.append(answer.status_code)

        threads = [threading.Thread(target=send, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return answers

    assert burst("9.1.0.70", "2026-11-30T00:00:00Z") == [201] * len(names)
    first = summed(_consistent(service))
    assert first["versions"][("cudnn", "9.1.0.70")] == len(names)
    assert burst("9.5.1.17", "2026-12-01T00:00:00Z") == [201] * len(names)
    second = summed(_consistent(service))
    assert ("cudnn", "9.1.0.70") not in second["versions"]
    assert second["versions"][("cudnn", "9.5.1.17")] == len(names)


def test_catalog_import_refreshes_the_verdict_shares(
    service: Service, post_report: Callable[..., Any]
) -> None:
    admin = service.token("admin", name="ops")
    put = service.client.put(
        "/api/v1/trust-policy",
        content=policy_yaml(("nvidia", NVIDIA)),
        headers=auth(admin, **YAML),
    )
    assert put.status_code == 201, put.text
    _post(post_report, boms.gpuprov_bom(name="registry.example.com/ml/clean:1"))
    _post(
        post_report,
        boms.gpuprov_bom(
            name="registry.example.com/ml/tampered:1",
            owners=[_without_graph()],
            extra_libs=[_tampered_graph("e" * 64)],
        ),
    )
    assert _figures(service)["provenance_verified"] == 0
    assert _figures(service)["provenance_conflicts"] == 0
    imported = service.client.post(
        "/api/v1/catalogs",
        content=signed(golden_cudnn(), NVIDIA),
        headers=auth(admin, **{"Content-Type": "application/json"}),
    )
    assert imported.status_code == 201, imported.text
    _consistent(service)
    figures = _figures(service)
    # the clean image's eight cuDNN files and the tampered one's seven; its graph conflicts
    assert figures["provenance_verified"] == 15
    assert figures["provenance_conflicts"] == 1


def test_migration_backfills_the_counts(service: Service, post_report: Callable[..., Any]) -> None:
    _post(post_report, boms.gpuprov_bom(name="registry.example.com/ml/train:1.0"))
    _post(
        post_report,
        boms.gpuprov_bom(
            kind="host",
            name="gpu-node-2",
            machine_id="a2",
            owners=[_without_graph(), boms.cudnn_wheel("8.9.7.29", cuda=11)],
            extra_libs=[_tampered_graph()],
        ),
    )
    maintained = _consistent(service)
    assert maintained["digests"] and maintained["versions"] and maintained["verdicts"]
    service.db.engine.dispose()  # no pooled connection holds the tables
    command.downgrade(alembic_config(service.url), "0012")
    with service.db.session() as session:
        tables = {
            row[0]
            for row in session.execute(
                text(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                    if service.backend == "sqlite"
                    else "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                )
            )
        }
    assert not {"library_digest", "library_version", "asset_file_verdicts"} & tables
    service.db.engine.dispose()
    upgrade(service.url)
    assert _consistent(service) == maintained
