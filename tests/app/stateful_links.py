"""Sequences of calls that follow the OpenAPI document's links, run by
`test_schemathesis.test_stateful_links` in a fresh interpreter (this file is not collected by
the suite itself: its name does not start with test_)."""

from __future__ import annotations

import itertools
import os
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, settings

from app.domain.tokens import Scope
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.test_schemathesis import CHECKS, REQUESTS, stored  # noqa: F401, F811  (a fixture)


def test_stateful_links(stored: Service) -> None:  # noqa: F811
    """Sequences of calls that follow the document's links (a report's asset and scan, a token
    to rotate and revoke): every answer conforms, none is a 5xx."""
    app: Any = stored.client.app
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    headers = auth(stored.token(*(s.value for s in Scope), name="stateful"))
    serial = itertools.count()
    seen: dict[str, int] = {"calls": 0, "linked": 0}

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: schemathesis.Case) -> None:
            method, path = case.method.lower(), case.operation.path
            n = next(serial)
            # valid bodies on most calls of the two sources of links, so the links are followed
            if (method, path) == ("post", "/api/v1/reports") and n % 3:
                case.body = boms.gpuprov_bom(name=f"registry.example/app-{n}:1")
                case.media_type = "application/json"
            elif (method, path) == ("post", "/api/v1/tokens") and n % 3:
                case.body = {"name": f"s{n}", "scopes": ["inventory:read"]}
            if "{" in path and case.path_parameters:
                seen["linked"] += 1

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            seen["calls"] += 1
            REQUESTS[0] += 1
            app.state.auth_limiter.reset()
            return {"headers": headers}

        def validate_response(  # type: ignore[override]
            self, response: Any, case: schemathesis.Case, **_: Any
        ) -> None:
            case.validate_response(response, checks=CHECKS)

    Workflow.run(
        settings=settings(
            max_examples=int(os.environ.get("GPUPROV_SCHEMATHESIS_STATEFUL", "12")),
            stateful_step_count=8,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
    )
    assert seen["calls"] >= 30 and seen["linked"] >= 5, seen
