"""A retried delivery of an asset's latest report brings its compliance up to date: the
evaluation after the first delivery may have been cut short (the database went away after the
commit, or the process died) while the agent, without an answer, retries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from tests.app import boms
from tests.app.conftest import Service
from tests.app.test_compliance_api import POLICY
from tests.app.test_gate_api import _now, put_policy


def _evaluated(service: Service) -> list[tuple[str, int]]:
    with service.db.session() as session:
        rows = session.execute(text("SELECT policy_name, scan_id FROM compliance_asset")).all()
    return [(str(p), int(s)) for p, s in rows]


def test_redelivery_of_the_latest_report_evaluates_it_again(
    service: Service, post_report: Callable[..., Any]
) -> None:
    assert put_policy(service, POLICY).status_code in (200, 201)
    older = boms.encode(boms.gpuprov_bom(kind="host", name="node-1", timestamp=_now(2)))
    latest = boms.encode(boms.gpuprov_bom(kind="host", name="node-1", timestamp=_now(1)))
    assert post_report(older).status_code == 201
    first = post_report(latest).json()
    assert _evaluated(service) == [("prod", first["scan_id"])]
    with service.db.transaction(write=True) as session:  # the evaluation that was cut short
        session.execute(text("DELETE FROM compliance_control"))
        session.execute(text("DELETE FROM compliance_asset"))
    again = post_report(latest)
    assert again.status_code == 200 and not again.json()["latest"]
    assert _evaluated(service) == [("prod", first["scan_id"])]
    # a late copy of an older report is no reason to evaluate: it is not the latest
    with service.db.transaction(write=True) as session:
        session.execute(text("DELETE FROM compliance_control"))
        session.execute(text("DELETE FROM compliance_asset"))
    assert post_report(older).status_code == 200
    assert _evaluated(service) == []
