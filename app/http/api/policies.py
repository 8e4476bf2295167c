"""``/api/v1/policies``: promotion policies stored by name and versioned (docs/policy.md).

Storing a changed policy re-evaluates fleet compliance under it in the same transaction.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Path, Query, Request, Response

from app.clock import utcnow
from app.domain import audit, compliance, policies
from app.http.body import read_limited
from app.http.deps import DatabaseDep, InventoryReader, PolicyWriter, SessionDep, WriteSessionDep
from app.http.params import Limit, Offset
from app.http.schemas import error_responses
from app.http.schemas_policy import PolicyOut, PolicyPage, PolicyPutOut

router = APIRouter(tags=["policies"])

POLICY_TYPES = (
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
    "text/plain",
    "application/json",
)
POLICY_EXAMPLE = """apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: prod
rules:
  integrity: {forbid: [modified]}
  versions: {allow: {cudnn: ">=9.1,<10"}}
  cuda_pairing: {}
  scan_age: {max_hours: 24}
"""
#: the name rule of the policy document (scanner.policy.document.PromotionPolicy.name)
PolicyName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="the policy's name (its document's `name`)",
    ),
]


async def _policy_body(request: Request, _: PolicyWriter) -> bytes:
    # read once the caller is known to be one who may change policies
    return await read_limited(
        request, policies.MAX_POLICY_BYTES, POLICY_TYPES, "a promotion policy"
    )


PolicyBody = Annotated[bytes, Depends(_policy_body)]


@router.put(
    "/policies/{name}",
    status_code=201,
    response_model=PolicyPutOut,
    responses={
        200: {"model": PolicyPutOut, "description": "the same document is the current version"},
        **error_responses(
            (403, "the caller lacks policy:write, or belongs to a team (policies are global)"),
            (413, "larger than 256 KiB"),
            (415, "not a YAML (or JSON) media type"),
            (422, "not a valid policy: details name each bad field by its path"),
        ),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/yaml": {"schema": {"type": "string"}, "example": POLICY_EXAMPLE}
            },
        }
    },
    summary="Store a new version of a promotion policy (YAML)",
)
def put_policy(
    principal: PolicyWriter,
    name: PolicyName,
    document: PolicyBody,
    session: WriteSessionDep,
    db: DatabaseDep,
    response: Response,
    background: BackgroundTasks,
) -> dict[str, Any]:
    """Validate the policy as `gpuprov gate --policy-file` does, store it as the next version
    of `name`, and re-evaluate fleet compliance under it (on a large fleet, after answering:
    `compliance_pending`)."""
    now = utcnow()
    row, created = policies.put_policy(session, name, document, principal, now)
    if created:
        audit.record_policy(session, principal.actor, row.name, row.version, row.content_sha256)
    trusted = db.settings.trusted_authors
    evaluated = compliance.reevaluate_on_store(session, row, now, trusted) if created else None
    pending = created and evaluated is None
    if pending:  # runs once the version is committed and the answer sent
        background.add_task(compliance.reevaluate_pending, db, row.name, row.version, now)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/api/v1/policies/{name}?version={row.version}"
    return {
        **policies.policy_dict(row),
        "created": created,
        "compliance_evaluated": evaluated,
        "compliance_pending": pending,
    }


@router.get("/policies", response_model=PolicyPage)
def list_policies(
    _: InventoryReader, session: SessionDep, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    """Every stored policy's current version, by name."""
    return policies.list_policies(session, limit, offset)


@router.get("/policies/{name}", response_model=PolicyOut)
def get_policy(
    _: InventoryReader,
    session: SessionDep,
    name: PolicyName,
    version: Annotated[
        int | None, Query(ge=1, le=2**31 - 1, description="a version; default the current one")
    ] = None,
) -> dict[str, Any]:
    """The current (or given) version of a policy, with its document."""
    return policies.policy_dict(policies.stored(session, name, version))


@router.get("/policies/{name}/history", response_model=PolicyPage)
def policy_history(
    _: InventoryReader,
    session: SessionDep,
    name: PolicyName,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """Every version of a policy, newest first."""
    return policies.history(session, name, limit, offset)
