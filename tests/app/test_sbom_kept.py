"""The normalized SBOM a process keeps (app/domain/inventory/sbom.py) is the library's document for
the rows as they are now: asked again it is the same bytes, and a changed row is a new document."""

from __future__ import annotations

import gc
import json
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import update

from app.domain.inventory import sbom
from app.domain.inventory.queries import find_asset, find_scan
from app.storage.repositories import inventory as repo
from app.storage.tables import Artifact
from tests.app import boms
from tests.app.conftest import Service, auth


def _normalized(service: Service, token: str, asset: int, scan: int | None = None) -> str:
    params: dict[str, Any] = {"format": "normalized"}
    if scan is not None:
        params["scan_id"] = scan
    answer = service.client.get(f"/api/v1/assets/{asset}/sbom", params=params, headers=auth(token))
    assert answer.status_code == 200, answer.text
    return str(answer.text)


def _encoded_now(service: Service, asset_id: int, scan_id: int | None) -> str:
    """The library's document for the rows as stored now, bypassing what is kept."""
    with service.db.session() as session:
        asset = find_asset(session, asset_id)
        scan = find_scan(session, asset_id, scan_id)
        return sbom.encode_normalized(
            asset,
            scan,
            repo.scan_packages(session, scan.id),
            repo.scan_artifacts(session, [scan.id]),
        )


def _labels(doc: str) -> dict[str, str]:
    props = json.loads(doc)["metadata"]["component"]["properties"]
    return {p["name"]: p["value"] for p in props if p["name"].startswith("gpuprov:label:")}


def test_a_kept_document_is_the_librarys_and_follows_the_rows(
    service: Service, post_report: Callable[..., Any]
) -> None:
    sbom.KEPT.clear()
    reader = service.token("inventory:read")
    first = post_report(boms.encode(boms.gpuprov_bom(serial=uuid.UUID(int=1).urn)), label="team=a")
    assert first.status_code == 201, first.text
    asset, scan = first.json()["asset_id"], first.json()["scan_id"]

    doc = _normalized(service, reader, asset)
    assert doc == _encoded_now(service, asset, None)
    assert _normalized(service, reader, asset) == doc  # kept: the same bytes
    assert _labels(doc) == {"gpuprov:label:team": "a"}

    # Another report of the asset relabels it: the first scan's document names the new label.
    second = post_report(boms.encode(boms.gpuprov_bom(serial=uuid.UUID(int=2).urn)), label="team=b")
    assert second.status_code == 201, second.text
    relabelled = _normalized(service, reader, asset, scan)
    assert _labels(relabelled) == {"gpuprov:label:team": "b"}
    assert relabelled == _encoded_now(service, asset, scan)

    # A file's row changes (as a catalog re-verification changes it): a new document.
    with service.db.transaction(write=True) as session:
        session.execute(
            update(Artifact).where(Artifact.scan_id == scan).values(provenance="conflict")
        )
    changed = _normalized(service, reader, asset, scan)
    assert changed != relabelled
    assert '"value": "conflict"' in changed
    assert changed == _encoded_now(service, asset, scan)


def test_kept_documents_stay_within_their_bytes() -> None:
    kept = sbom._Kept(10)
    kept.put("a", "12345")
    kept.put("b", "6789")
    assert kept.get("a") == "12345"  # now the most recently used
    kept.put("c", "xyz")
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == ("12345", None, "xyz")
    kept.put("d", "0123456789A")  # larger than the whole budget: not kept
    assert kept.get("d") is None and kept.get("a") == "12345"


def test_the_collector_resumes_after_the_last_pause() -> None:
    assert gc.isenabled()
    with sbom.collector_paused():
        assert not gc.isenabled()
        with sbom.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with sbom.collector_paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
