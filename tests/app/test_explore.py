"""The dashboard's libraries, drift and policy queries (`app.domain.explore`) on both backends:
file search by name and digest, environment parity, changes at the last scan, policy diffs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.domain import explore
from app.domain.inventory import queries
from app.errors import BadRequest, NotFound
from tests.app import boms
from tests.app.conftest import Service, auth

TAMPERED = "f" * 64


def _push(post_report: Callable[..., Any], bom: dict[str, Any], *labels: str) -> int:
    answer = post_report(boms.encode(bom), label=list(labels))
    assert answer.status_code == 201, answer.text
    return int(answer.json()["asset_id"])


@pytest.fixture
def fleet(service: Service, post_report: Callable[..., Any]) -> dict[str, int]:
    """prod runs cuDNN 9.1.0 and 9.5.1, staging only 9.1.0; one prod file is tampered; one host
    is scanned twice (cuDNN upgraded)."""
    wheel = boms.cudnn_wheel()
    tampered = boms.Owner(
        wheel.purl,
        wheel.name,
        wheel.version,
        [
            boms.Lib(**{**lib.__dict__, "sha256": TAMPERED}) if i == 1 else lib
            for i, lib in enumerate(wheel.libs)
        ],
    )
    ids = {
        "train": _push(post_report, boms.gpuprov_bom(name="acme/train:1"), "env=prod"),
        "serve": _push(post_report, boms.gpuprov_bom(name="acme/serve:1"), "env=staging"),
        "hotfix": _push(
            post_report,
            boms.gpuprov_bom(name="acme/train:1-hotfix", owners=[tampered]),
            "env=prod",
        ),
        "infer": _push(
            post_report,
            boms.gpuprov_bom(name="acme/infer:5", owners=[boms.cudnn_wheel("9.5.1.17")]),
            "env=prod",
        ),
    }
    host = {"kind": "host", "name": "gpu-node-1", "machine_id": "a1"}
    _push(post_report, boms.gpuprov_bom(**host, timestamp="2026-11-30T00:00:00Z"), "env=prod")
    ids["node"] = _push(
        post_report,
        boms.gpuprov_bom(
            **host, timestamp="2026-12-01T00:00:00Z", owners=[boms.cudnn_wheel("9.5.1.17")]
        ),
        "env=prod",
    )
    return ids


def test_search_by_digest_and_by_file_name(service: Service, fleet: dict[str, int]) -> None:
    with service.db.session() as session:
        found = explore.search_files(session, f"sha256:{TAMPERED.upper()}", 50, 0)
        assert found["by"] == "sha256" and found["total"] == 1
        (item,) = found["items"]
        assert (item["asset_id"], item["asset_name"]) == (fleet["hotfix"], "acme/train:1-hotfix")
        assert item["path"].endswith("libcudnn_graph.so.9")
        by_name = explore.search_files(session, "libcudnn_graph.so.9", 2, 0)
        assert by_name["by"] == "name" and by_name["total"] == 5  # every asset, current scans
        assert [i["asset_id"] for i in by_name["items"]] == sorted(fleet.values())[:2]
        # a path is searched by its file name; a glob matches names
        path = explore.search_files(session, f"{boms.SITE}/cudnn/lib/libcudnn_graph.so.9", 50, 0)
        assert path["total"] == 5
        glob = explore.search_files(session, "libcudnn_*.so.9", 1, 0)
        assert glob["total"] == 5 * 7  # libcudnn.so.9 has no "_"
        assert explore.search_files(session, "libcudnn_%", 50, 0)["total"] == 0  # no wildcard
        for bad in ("", "  ", "**", "x" * 256):
            with pytest.raises(BadRequest):
                explore.search_files(session, bad, 50, 0)


def test_parity_lists_versions_in_target_never_seen_in_baseline(
    service: Service, fleet: dict[str, int]
) -> None:
    with service.db.session() as session:
        gaps = explore.parity(session, "env", "prod", "staging", None, 50, 0)
        assert gaps["target"] == {"value": "prod", "assets": 4}
        assert gaps["baseline"] == {"value": "staging", "assets": 1}
        assert gaps["items"] == [{"family": "cudnn", "version": "9.5.1.17", "assets": 2}]
        assert gaps["total"] == 1
        # the other way round: staging runs nothing prod lacks
        assert explore.parity(session, "env", "staging", "prod", None, 50, 0)["total"] == 0
        # an unknown baseline: everything the target runs is missing there (two cuDNN
        # versions and the four families of the CUDA wheels)
        everything = explore.parity(session, "env", "prod", "nowhere", None, 1, 1)
        assert everything["total"] == 6 and len(everything["items"]) == 1
        assert explore.parity(session, "env", "prod", "nowhere", "cudnn", 50, 0)["total"] == 2
        assert explore.parity(session, "env", "prod", "nowhere", None, 50, 10)["total"] == 6
        with pytest.raises(BadRequest):
            explore.parity(session, "env", "prod\n", "staging", None, 50, 0)


def test_recent_changes_lists_rescanned_assets_with_their_diff(
    service: Service, fleet: dict[str, int]
) -> None:
    with service.db.session() as session:
        page = explore.recent_changes(session, 50, 0)
    assert page["total"] == 1
    (item,) = page["items"]
    assert item["asset"] == {"id": fleet["node"], "kind": "host", "name": "gpu-node-1"}
    assert item["from_scan"] and item["to_scan"] and item["from_scan"] != item["to_scan"]
    assert {(c["from"]["version"], c["to"]["version"]) for c in item["changed"]} == {
        ("9.1.0.70", "9.5.1.17")
    }
    # the cuda wheels were dropped in the second scan
    assert item["removed"] and not item["added"]


def test_policy_diff(service: Service) -> None:
    admin = service.token("admin")
    base = "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: prod\nrules:\n"
    for rules in ("  ownership: {}\n", "  ownership: {}\n  integrity: {forbid: [modified]}\n"):
        answer = service.client.put(
            "/api/v1/policies/prod",
            content=base + rules,
            headers=auth(admin, **{"Content-Type": "application/yaml"}),
        )
        assert answer.status_code == 201, answer.text
    with service.db.session() as session:
        diff = explore.policy_diff(session, "prod", 1, 2)
        assert (diff["from"]["version"], diff["to"]["version"]) == (1, 2)
        assert [line["tag"] for line in diff["lines"]][0] == "hunk"
        assert {"tag": "add", "text": "+  integrity: {forbid: [modified]}"} in diff["lines"]
        assert not [line for line in diff["lines"] if line["tag"] == "remove"]
        assert explore.policy_diff(session, "prod", 2, 2)["lines"] == []
        with pytest.raises(NotFound):
            explore.policy_diff(session, "prod", 1, 3)


def test_frameworks() -> None:
    assert set(explore.framework_ids()) == {"slsa-v1.2", "cis-v8", "nist-csf-2.0"}
    assert all(f["title"] and f["source"] for f in explore.frameworks())


def test_digest_conflicts_group_the_tampered_copy_with_the_vendor_one(
    service: Service, fleet: dict[str, int]
) -> None:
    with service.db.session() as session:
        (group,) = queries.digest_conflicts(session, None, 200)
        assert queries.digest_conflicts(session, "cudart", 200) == []
    assert (group["family"], group["component"], group["version"]) == (
        "cudnn",
        "cudnn_graph",
        "9.1.0.70",
    )
    assets = {d["sha256"]: d["assets"] for d in group["digests"]}
    assert assets == {TAMPERED: 1, boms.cudnn_wheel().libs[1].digest(): 2}


def test_digest_conflicts_are_limited_by_group_and_filtered_by_family(
    service: Service, fleet: dict[str, int], post_report: Callable[..., Any]
) -> None:
    (cudart, *others) = boms.cuda_wheels()
    patched = boms.Owner(
        cudart.purl,
        cudart.name,
        cudart.version,
        [boms.Lib(**{**lib.__dict__, "sha256": "c" * 64}) for lib in cudart.libs],
    )
    _push(post_report, boms.gpuprov_bom(name="acme/patched:1", owners=[patched, *others]))
    with service.db.session() as session:
        both = queries.digest_conflicts(session, None, 200)
        first = queries.digest_conflicts(session, None, 1)
        only = queries.digest_conflicts(session, "cudnn", 200)
    assert [g["family"] for g in both] == ["cudart", "cudnn"]
    assert [g["family"] for g in first] == ["cudart"]
    assert {d["sha256"] for d in first[0]["digests"]} >= {"c" * 64}
    assert [g["family"] for g in only] == ["cudnn"]
