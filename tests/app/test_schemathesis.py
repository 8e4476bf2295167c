"""A bounded schemathesis run over every operation of the OpenAPI document, on both databases,
with a token of every scope and with none: no answer is a 5xx, and every answer (status, media
type, body with its formats, headers) is one the document describes. Positive cases (valid by
the document, formats included) must be accepted: an answer of 400 or 422 to one of them means
the document is looser than the service (issue 17). Negative ones (invalid parameters and
bodies) must be refused with a 4xx.

What the document cannot state, the positive cases are given (`_positive`): a valid CycloneDX
BOM, policy, trust policy, signed catalog or OSV advisory where the document says only "a BOM",
"YAML" or "a document";
``where-used`` with at least one filter; an ``audit`` window that does not end before it
starts; a token expiry in the future (the format ``gpuprov-expiry``); a CI trust rule naming
its provider's numeric ids; an analysis of the stored asset; a webhook URL the SSRF rules
accept (a public HTTPS address); a group mapping naming no team (none is stored). Each is said
in the document's descriptions.

Bounded: a few dozen examples per operation in all (``EXAMPLES``), so the whole run takes tens of
seconds; hypothesis keeps no example database between runs, so each run is reproducible from
its seed (`pytest -p hypothesis --hypothesis-seed=N`).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.domain.tokens import MAX_LIFETIME, Scope
from app.http.params import rfc3339
from tests.app import boms, catalogs
from tests.app.conftest import Service, auth
from tests.fixtures import keys
from tests.scanner.advisories import documents as advisory_documents

#: examples per operation and generation mode: for an operation the caller may call (its scope,
#: or admin), and for one it may not (every answer is then a 401 or 403)
#: (``GPUPROV_SCHEMATHESIS_EXAMPLES=200`` for a deeper run by hand)
EXAMPLES_ALLOWED = int(os.environ.get("GPUPROV_SCHEMATHESIS_EXAMPLES", "10"))
EXAMPLES_REFUSED = 2
#: requests sent by this module's tests in this process (the figure docs/limits.md quotes)
REQUESTS = [0]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


#: the checks of a positive case: also accepted (no 400 or 422 to a request valid by the document)
POSITIVE_CHECKS = [*CHECKS, positive_data_acceptance]
#: the signer of the trust policy and catalogs the positive cases send
SIGNER = keys.shared("ecdsa", "schemathesis")
#: the library filters of where-used, at least one of which it needs
WHERE_USED_FILTERS = ("family", "version", "sha256", "verdict", "integrity", "provenance", "loaded")
_SERIALS = itertools.count()
POLICY = (
    "apiVersion: gpuprov.dev/v1\nkind: PromotionPolicy\nname: {name}\nrules:\n  integrity: {{}}\n"
)


def _expiry() -> st.SearchStrategy[str]:
    """`TokenIn.expires` (format ``gpuprov-expiry``): a duration, date or RFC 3339 time in the
    future and at most 3660 days away (a day of margin at each end for the clock)."""
    days = MAX_LIFETIME.days
    units = {"m": 24 * 60, "h": 24, "d": 1, "w": 1 / 7}
    durations = st.sampled_from(sorted(units)).flatmap(
        lambda u: st.integers(1, int((days - 1) * units[u])).map(lambda n: f"{n}{u}")
    )
    today = datetime.now(UTC).date()
    dates = st.dates(today + timedelta(days=2), today + timedelta(days=days - 1)).map(str)
    times = st.datetimes(
        datetime.now() + timedelta(days=2), datetime.now() + timedelta(days=days - 1)
    ).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return durations | dates | times


schemathesis.openapi.format("gpuprov-expiry", _expiry())


def _bom() -> dict[str, Any]:
    n = next(_SERIALS)
    return boms.gpuprov_bom(name=f"registry.example/positive-{n}:1")


def _positive(case: schemathesis.Case) -> schemathesis.Case:
    """What the document states in words and the positive cases need in fact (module doc)."""
    method, path = case.method.lower(), case.operation.path
    if (method, path) == ("post", "/api/v1/reports"):
        case.body = _bom()
        case.media_type = "application/json"
    elif (method, path) == ("post", "/api/v1/gate") and isinstance(case.body, dict):
        if "bom" in case.body:
            case.body["bom"] = _bom()
    elif (method, path) == ("put", "/api/v1/policies/{name}"):
        name = (case.path_parameters or {})["name"]
        case.body = POLICY.format(name=name).encode()
    elif (method, path) == ("put", "/api/v1/ci-trust/{name}"):
        # the provider's numeric ids, which the document states in words
        case.body = {
            "issuer": "https://token.actions.githubusercontent.com",
            "claims": {"repository_owner_id": "1001", "repository_id": "2002"},
            "scopes": ["gate"],
        }
        case.media_type = "application/json"
    elif (method, path) == ("put", "/api/v1/group-mappings/{name}"):
        # "a stored team" (the document's words): no team here, so none named
        if isinstance(case.body, dict):
            case.body.pop("team", None)
    elif (method, path) == ("put", "/api/v1/trust-policy"):
        case.body = catalogs.policy_yaml(("vendor", SIGNER)).encode()
    elif (method, path) == ("post", "/api/v1/catalogs"):
        catalog = catalogs.catalog_from_bom(_bom(), f"golden-{next(_SERIALS)}")
        case.body = json.loads(catalogs.signed(catalog, SIGNER))
    elif (method, path) == ("post", "/api/v1/advisories"):
        # "one CSAF, OSV or CVE Record document": a valid OSV record, new each time
        case.body = advisory_documents.osv(id=f"GHSA-pos-{next(_SERIALS)}")
        case.media_type = "application/json"
    elif (method, path) == ("post", "/api/v1/vex"):
        # "one OpenVEX or CycloneDX VEX document": the document's own example
        from app.http.api.vex import EXAMPLE

        case.body = EXAMPLE
        case.media_type = "application/json"
    elif (method, path) == ("post", "/api/v1/analyses"):
        # "exactly one of asset_id and selector; not_affected needs a justification or a
        # detail, fixed a detail; an expiry in the future" (the document's descriptions)
        case.body = {"cve": "CVE-2026-0001", "asset_id": 1, "state": "affected"}
        case.media_type = "application/json"
    elif (method, path) == ("post", "/api/v1/webhooks"):
        # a public HTTPS URL: the SSRF rules refuse internal addresses, which a pattern cannot say
        case.body = {
            "name": f"positive-{next(_SERIALS)}",
            "url": "https://hooks.example.com/gpuprov",
            "events": ["gate.denied"],
        }
        case.media_type = "application/json"
    elif (method, path) == ("get", "/api/v1/where-used"):
        query = case.query if case.query is not None else {}
        if not set(query) & set(WHERE_USED_FILTERS):
            query["family"] = "cudnn"
        case.query = query
    elif (method, path) == ("get", "/api/v1/audit") and case.query:
        since, until = (rfc3339(case.query.get(k), k) for k in ("since", "until"))
        if since is not None and until is not None and since > until:
            case.query["since"], case.query["until"] = case.query["until"], case.query["since"]
    return case


def _scopes(operation: schemathesis.APIOperation) -> set[str]:
    requirements = operation.definition.raw.get("security", [])
    return {scope for r in requirements for scope in r.get("HTTPBearer", [])}


def _check(
    operation: schemathesis.APIOperation,
    mode: GenerationMode,
    headers: dict[str, str],
    examples: int,
) -> str | None:
    """Run ``examples`` cases of one operation; the first failure's report, or None."""
    positive = mode is GenerationMode.POSITIVE
    checks = POSITIVE_CHECKS if positive else [*CHECKS, negative_data_rejection]
    strategy = operation.as_strategy(generation_mode=mode, headers=headers or None)

    @seed(20261202)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    # the token as a fixed header: a negative case never drops it (that is the no-token run)
    @given(case=strategy.map(_positive) if positive else strategy)
    def call(case: schemathesis.Case) -> None:
        REQUESTS[0] += 1
        case.validate_response(case.call(), checks=checks)

    try:
        call()
    except Unsatisfiable:  # nothing to negate: no parameter and no body
        return None
    except Exception as e:
        return f"{operation.label} ({mode.value}): {e}"
    return None


def _run(service: Service, scope: str | None) -> list[str]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", service.client.app)
    headers = auth(service.token(scope)) if scope else {}
    failures = []
    for result in schema.get_all_operations():
        operation = result.ok()
        needed = _scopes(operation)
        allowed = not needed or scope == Scope.ADMIN.value or scope in needed
        examples = EXAMPLES_ALLOWED if allowed else EXAMPLES_REFUSED
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failure = _check(operation, mode, headers, examples)
            if failure:
                failures.append(failure)
    return failures


@pytest.fixture
def stored(service: Service, post_report: Callable[..., Any]) -> Service:
    """A service with one stored report, so ids 1 exist and queries have rows to read."""
    assert post_report(boms.encode(boms.gpuprov_bom())).status_code == 201
    return service


#: least requests one scope's run sends (measured: 572 admin, 396 inventory:read, 136 each for
#: report:write and gate, about 150 without a token: some 1,400 a database, 2,800 a run)
MINIMUM = {
    None: 100,
    "admin": 500,
    "inventory:read": 350,
    "report:write": 120,
    "gate": 120,
    "triage": 120,
    "policy:write": 120,
}


@pytest.mark.parametrize("scope", [None, *(s.value for s in Scope)])
def test_schemathesis(stored: Service, scope: str | None) -> None:
    before = REQUESTS[0]
    failures = _run(stored, scope)
    assert not failures, "\n\n".join(failures)
    sent = REQUESTS[0] - before
    assert sent >= MINIMUM[scope], f"only {sent} requests with {scope}"


def test_stateful_links(service: Service) -> None:
    """The link-following state machine (tests/app/stateful_links.py), in a fresh interpreter on
    this backend: schemathesis and hypothesis keep process-wide state that the whole suite's
    earlier runs change, after which the machine's replay of a case diverges."""
    backend = "sqlite" if service.backend == "sqlite" else "postgresql"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "python_files=stateful_links.py",
            "-k",
            backend,
            str(Path(__file__).with_name("stateful_links.py")),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]
