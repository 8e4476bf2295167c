"""``/api/v1/trust-policy`` and ``/api/v1/catalogs``: the trust policy (versioned) and the signed
reference catalogs that give stored GPU library files their provenance verdicts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Request, Response

from app.clock import utcnow
from app.domain import audit, catalogs, compliance
from app.errors import AppError
from app.http.body import check_limited, ingest_slot, read_limited
from app.http.deps import (
    Admin,
    DatabaseDep,
    InventoryReader,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
)
from app.http.metrics import Metrics
from app.http.params import Limit, Offset
from app.http.schemas import (
    CatalogImportOut,
    CatalogPage,
    PolicyChangeOut,
    TrustPolicyOut,
    TrustPolicyPage,
    error_responses,
)

router = APIRouter(tags=["provenance"])

POLICY_TYPES = (
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
    "text/plain",
    "application/json",
)
CATALOG_TYPES = ("application/json", "+json")
#: a complete policy (one signer trusted for every family, its P-256 public key inline)
POLICY_EXAMPLE = """version: 1
signers:
  - name: nvidia
    families: ["*"]
    key_pem: |
      -----BEGIN PUBLIC KEY-----
      MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEtgrpJMxDfyz6UOMYa1DUgCo2gPkJ
      +gzNbqwAjudTEYFGwEAbZbBaiJ5NK9pTMI1VAP0DGyBqmH2Uo8sE2gBHng==
      -----END PUBLIC KEY-----
"""


async def _policy_body(request: Request, _: Admin) -> bytes:
    # read once the caller is known to be an admin
    return await read_limited(request, catalogs.MAX_POLICY_BYTES, POLICY_TYPES, "a trust policy")


async def _catalog_body(
    request: Request, settings: SettingsDep, principal: Admin
) -> AsyncIterator[bytes]:
    # as large as a report: read by an admin, in an ingest slot
    check_limited(request, settings.max_report_bytes, CATALOG_TYPES, "a catalog")
    with ingest_slot(request, principal, settings):
        raw = await read_limited(request, settings.max_report_bytes, CATALOG_TYPES, "a catalog")
        if not raw:
            raise AppError("the request body is empty; send the signed catalog JSON", 422)
        yield raw


PolicyBody = Annotated[bytes, Depends(_policy_body)]
CatalogBody = Annotated[bytes, Depends(_catalog_body, scope="function")]


def _body(media_types: tuple[str, ...], example: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {t: {"schema": {"type": "string"}, "example": example} for t in media_types},
        }
    }


@router.put(
    "/trust-policy",
    status_code=201,
    response_model=PolicyChangeOut,
    responses=error_responses(
        (413, "larger than 1 MiB"),
        (415, "not a YAML media type"),
        (422, "not a valid trust policy; the message says why"),
    ),
    openapi_extra=_body(("application/yaml",), POLICY_EXAMPLE),
    summary="Store a new trust policy version (YAML)",
)
def put_trust_policy(
    principal: Admin,
    document: PolicyBody,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
) -> dict[str, Any]:
    """Check the policy as the scanner would (keys and roots inline), store it as the next
    version, verify every stored catalog again under it and re-evaluate stored verdicts (fleet
    compliance, on a large fleet, after answering: `reevaluation.compliance_pending`)."""
    now = utcnow()
    answer, pending = catalogs.put_policy(session, document, principal, now)
    audit.record_trust_policy(session, principal.actor, answer)
    if pending:  # runs once the change is committed and the answer sent
        background.add_task(compliance.reevaluate_pending_all, db, pending, now)
    return answer


@router.get(
    "/trust-policy",
    response_model=TrustPolicyOut,
    responses=error_responses((404, "no trust policy stored yet")),
)
def get_trust_policy(_: Admin, session: SessionDep) -> dict[str, Any]:
    """The current trust policy, with its version."""
    return catalogs.current_policy(session)


@router.get("/trust-policy/history", response_model=TrustPolicyPage)
def trust_policy_history(
    _: Admin, session: SessionDep, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """Every trust policy version, newest first."""
    return catalogs.policy_history(session, limit, offset)


@router.post(
    "/catalogs",
    status_code=201,
    response_model=CatalogImportOut,
    responses={
        200: {"model": CatalogImportOut, "description": "these bytes were imported before"},
        **error_responses(
            (409, "no trust policy stored"),
            (413, "larger than the report size limit"),
            (415, "not JSON"),
            (422, "signature or signer not trusted, or not a catalog: the message says why"),
        ),
    },
    openapi_extra=_body(("application/json",), '{"payloadType": "application/vnd.in-toto+json"}'),
    summary="Import a signed reference catalog (DSSE envelope or Sigstore bundle)",
)
def post_catalog(
    request: Request,
    principal: Admin,
    raw: CatalogBody,
    session: WriteSessionDep,
    db: DatabaseDep,
    background: BackgroundTasks,
    response: Response,
    name: Annotated[
        str | None,
        Query(max_length=200, description="name when the catalog's predicate has none"),
    ] = None,
) -> dict[str, Any]:
    """Verify the catalog against the current trust policy (nothing is stored when it is not
    trusted), store it, and fold it into every stored file's provenance verdict."""
    now = utcnow()
    try:
        result = catalogs.import_catalog(session, raw, name, principal, now)
    except AppError as e:
        if e.status == 422:  # a signature or signer the trust policy does not accept
            metrics: Metrics = request.app.state.metrics
            metrics.verification_failures.labels("catalog").inc()
        raise
    if result.created:
        audit.record_catalog(session, principal.actor, result.catalog)
    response.status_code = 201 if result.created else 200
    response.headers["Location"] = "/api/v1/catalogs"
    if result.compliance_pending:  # runs once the import is committed and the answer sent
        background.add_task(compliance.reevaluate_pending_all, db, result.compliance_pending, now)
    return {**result.catalog, "created": result.created, "reevaluation": result.reevaluation_dict()}


@router.get("/catalogs", response_model=CatalogPage)
def list_catalogs(
    _: InventoryReader, session: SessionDep, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """The stored catalogs in import order (the order verdicts consult them in)."""
    return catalogs.list_catalogs(session, limit, offset)
