"""The seeded fleet is what the dashboard tests rely on: checked through the API, so a change in
the scanner or the service that breaks the story fails here first, with a clear message."""

from __future__ import annotations

from typing import Any

import httpx

from tests.browser.conftest import Seeded
from tests.browser.fleet import HOSTILE_NAME, TAMPERED, TAMPERED_FILE


def _get(live: Seeded, path: str, **params: Any) -> Any:
    response = httpx.get(
        live.url + path,
        params=params,
        headers={"Authorization": f"Bearer {live.admin}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_the_tampered_image_is_denied_for_its_modified_file_and_missing_signature(
    live: Seeded,
) -> None:
    decisions = {d["subject"]["name"]: d for d in _get(live, "/api/v1/gate/decisions")["items"]}
    tampered = decisions[TAMPERED]
    assert tampered["decision"] == "deny"
    failed = {r["rule"] for r in tampered["reasons"] if r["status"] == "fail"}
    assert {"integrity", "image_signature", "provenance"} <= failed
    assert tampered["controls"]["ID.RA-09"] == "fail"
    assert decisions["registry.acme.test/ml/train:v1"]["decision"] == "allow"
    detail = _get(live, f"/api/v1/assets/{live.assets[TAMPERED]}")
    files = {lib["path"]: lib for lib in detail["libraries"]}
    assert files[TAMPERED_FILE]["integrity"] == "modified"
    assert files[TAMPERED_FILE]["provenance"] == "conflict"
    assert files["/opt/app/lib/libcudart.so.12"]["integrity"] == "unowned"


def test_hostile_report_values_are_stored_as_given(live: Seeded) -> None:
    detail = _get(live, f"/api/v1/assets/{live.assets[HOSTILE_NAME]}")
    assert detail["name"] == HOSTILE_NAME
    assert any('"><script>' in (lib["path"] or "") for lib in detail["libraries"])


def test_the_host_has_two_scans_and_the_fleet_a_version_only_in_prod(live: Seeded) -> None:
    detail = _get(live, f"/api/v1/assets/{live.assets['gpu-node-07']}")
    assert len(detail["history"]) == 2
    versions = {(i["family"], i["version"]) for i in _get(live, "/api/v1/libraries")["items"]}
    assert ("cudnn", "9.3.0.75") in versions and ("cudart", "12.6.77") in versions
