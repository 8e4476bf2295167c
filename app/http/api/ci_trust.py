"""``/api/v1/ci-trust``: the rules that let CI jobs gate and push with their provider's OIDC
ID token instead of a stored secret (docs/ci.md). Admin only; every change audited."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.clock import utcnow
from app.domain import ci_rules
from app.errors import AppError, BadRequest
from app.http.body import read_model
from app.http.deps import Admin, SessionDep, SettingsDep, WriteSessionDep
from app.http.schemas import error_responses

router = APIRouter(tags=["ci-trust"])

RuleName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="the rule's name",
    ),
]
_EXAMPLE: dict[str, Any] = {
    "issuer": "https://token.actions.githubusercontent.com",
    "claims": {
        "repository_owner_id": "1001",
        "repository_id": "2002",
        "repository": "acme/trainer",
        "environment": "release",
    },
    "scopes": ["gate", "report:write"],
    "assets": ["registry.example.com/acme/trainer*"],
    "policies": ["prod"],
}


class CiTrustRuleIn(BaseModel):
    """A CI trust rule: tokens of `issuer` carrying every claim of `claims` get `scopes`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_EXAMPLE]})

    issuer: str = Field(max_length=1024, description="the CI provider's OIDC issuer URL")
    provider: Literal["github", "gitlab"] | None = Field(
        default=None, description="for issuers other than GitHub's and GitLab.com's"
    )
    audience: str | None = Field(
        default=None, max_length=256, description="must be GPUPROV_CI_AUDIENCE (the default)"
    )
    claims: dict[str, Annotated[str, Field(max_length=512)]] = Field(
        max_length=32,
        description="claim → exact value (`*` within one path segment on ref and ref_path); "
        "a GitHub rule must name repository_owner_id and repository_id, a GitLab rule "
        "namespace_id and project_id (numeric ids; names can be registered again)",
    )
    scopes: list[Literal["gate", "report:write"]] = Field(min_length=1, max_length=2)
    assets: list[Annotated[str, Field(max_length=1024)]] = Field(default=[], max_length=100)
    policies: list[Annotated[str, Field(max_length=128)]] = Field(default=[], max_length=100)


class CiTrustRuleOut(BaseModel):
    name: str
    issuer: str
    provider: Literal["github", "gitlab"]
    audience: str
    claims: dict[str, str] = Field(examples=[_EXAMPLE["claims"]])
    scopes: list[str]
    assets: list[str]
    policies: list[str]


class CiTrustRuleList(BaseModel):
    items: list[CiTrustRuleOut]


async def _rule_request(request: Request, _: Admin) -> CiTrustRuleIn:
    # a dependency after Admin: the body is read once the caller is known to be an admin
    return await read_model(request, CiTrustRuleIn, "a CI trust rule")


@router.put(
    "/ci-trust/{name}",
    status_code=201,
    response_model=CiTrustRuleOut,
    responses={
        200: {"model": CiTrustRuleOut, "description": "an existing rule replaced"},
        **error_responses(
            (413, "larger than 1 MiB"),
            (415, "not JSON"),
            (422, "not a rule this service accepts: the message says why"),
        ),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": CiTrustRuleIn.model_json_schema()}},
        }
    },
    summary="Store a CI trust rule",
)
def put_rule(
    principal: Admin,
    name: RuleName,
    rule: Annotated[CiTrustRuleIn, Depends(_rule_request)],
    session: WriteSessionDep,
    settings: SettingsDep,
    response: Response,
) -> dict[str, Any]:
    """Store (or replace) the rule `name`: checked as it will be applied (numeric ids required,
    globs on refs only, the service's audience), audited."""
    body = rule.model_dump(exclude_none=True)
    try:
        document, created = ci_rules.put_rule(
            session, name, body, settings, principal.actor, utcnow()
        )
    except BadRequest as e:  # the body's content: 422, as every refused body
        raise AppError(e.message, 422, details=[{"pointer": "/body", "message": e.message}]) from e
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/api/v1/ci-trust/{name}"
    return document


@router.get("/ci-trust", response_model=CiTrustRuleList)
def list_rules(_: Admin, session: SessionDep) -> dict[str, Any]:
    """Every CI trust rule, by name."""
    return {"items": ci_rules.list_rules(session)}


@router.get(
    "/ci-trust/{name}",
    response_model=CiTrustRuleOut,
    responses=error_responses((404, "no such rule")),
)
def get_rule(_: Admin, session: SessionDep, name: RuleName) -> dict[str, Any]:
    """One CI trust rule."""
    return ci_rules.get_rule(session, name)


@router.delete(
    "/ci-trust/{name}",
    response_model=CiTrustRuleOut,
    responses=error_responses((404, "no such rule")),
)
def delete_rule(principal: Admin, session: WriteSessionDep, name: RuleName) -> dict[str, Any]:
    """Remove a rule (answered with it): the tokens it admitted are refused from the next
    request on."""
    return ci_rules.delete_rule(session, name, principal.actor, utcnow())
