"""``/api/v1/group-mappings``: which identity-provider group gives which role and team to the
people who sign in (docs/sso.md). Admin only; every change audited. Groups mapped by
GPUPROV_OIDC_ROLES are listed and read here, never changed (409)."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.clock import utcnow
from app.domain import group_mappings
from app.domain.teams import TEAM_NAME_PATTERN
from app.http.body import read_model
from app.http.deps import Admin, SessionDep, SettingsDep, WriteSessionDep
from app.http.schemas import error_responses

router = APIRouter(tags=["group-mappings"])

GroupName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=256,
        pattern=group_mappings.GROUP_PATTERN,
        description="the group, as the provider's groups claim names it (no '/')",
    ),
]
RoleName = Literal["viewer", "analyst", "admin"]


class GroupMappingIn(BaseModel):
    """What a group gives its members: a role, and optionally the team they belong to."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"role": "analyst", "team": "ml"}, {"role": "admin"}],
            # an admin sees every asset: a group giving admin names no team
            "not": {"required": ["role", "team"], "properties": {"role": {"const": "admin"}}},
        },
    )

    role: RoleName
    team: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=TEAM_NAME_PATTERN,
        description="a stored team (`PUT /api/v1/teams/{name}`) whose asset scope confines the "
        "group's members; not with admin; default none",
    )


class GroupMappingOut(BaseModel):
    group: str
    role: RoleName
    team: str | None
    source: Literal["configuration", "database"] = Field(
        description="`configuration`: GPUPROV_OIDC_ROLES (read-only here); `database`: stored "
        "by an admin"
    )
    in_effect: bool = Field(
        description="false for a stored mapping of a group the configuration maps too (the "
        "configuration's is used)"
    )
    created_at: str | None
    updated_at: str | None


class GroupMappingList(BaseModel):
    items: list[GroupMappingOut]


async def _mapping_request(request: Request, _: Admin) -> GroupMappingIn:
    # a dependency after Admin: the body is read once the caller is known to be an admin
    return await read_model(request, GroupMappingIn, "a group mapping")


@router.get("/group-mappings", response_model=GroupMappingList)
def list_mappings(_: Admin, session: SessionDep, settings: SettingsDep) -> dict[str, Any]:
    """Every group mapping, from the configuration and stored, by group."""
    return {"items": group_mappings.list_mappings(session, settings.oidc_roles)}


@router.get(
    "/group-mappings/{name}",
    response_model=GroupMappingOut,
    responses=error_responses((404, "no mapping of the group: its members have no access")),
)
def get_mapping(
    _: Admin, session: SessionDep, settings: SettingsDep, name: GroupName
) -> dict[str, Any]:
    """The mapping in effect for one group (the configuration's, else the stored one)."""
    return group_mappings.get_mapping(session, name, settings.oidc_roles)


@router.put(
    "/group-mappings/{name}",
    status_code=201,
    response_model=GroupMappingOut,
    responses={
        200: {"model": GroupMappingOut, "description": "the stored mapping replaced"},
        **error_responses(
            (409, "the configuration (GPUPROV_OIDC_ROLES) maps the group"),
            (413, "larger than 1 MiB"),
            (415, "not JSON"),
            (422, "an unknown role or team, or a team with admin"),
        ),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": GroupMappingIn.model_json_schema()}},
        }
    },
    summary="Store a group mapping",
)
def put_mapping(
    principal: Admin,
    name: GroupName,
    body: Annotated[GroupMappingIn, Depends(_mapping_request)],
    session: WriteSessionDep,
    settings: SettingsDep,
    response: Response,
) -> dict[str, Any]:
    """Map the group `name` to a role (and team), audited: its members get them at their next
    sign-in, and lose what a replaced mapping gave at their next page."""
    mapping, created = group_mappings.put_mapping(
        session, name, body.role, body.team, settings.oidc_roles, principal.actor, utcnow()
    )
    response.status_code = 201 if created else 200
    # a group's name may be any text: percent-encoded, as a header holds only ASCII safely
    response.headers["Location"] = f"/api/v1/group-mappings/{quote(name, safe='')}"
    return mapping


@router.delete(
    "/group-mappings/{name}",
    response_model=GroupMappingOut,
    responses=error_responses(
        (404, "no stored mapping of the group"),
        (409, "only the configuration (GPUPROV_OIDC_ROLES) maps the group"),
    ),
)
def delete_mapping(
    principal: Admin, session: WriteSessionDep, settings: SettingsDep, name: GroupName
) -> dict[str, Any]:
    """Remove a stored mapping (answered with it; audited): its members lose the access it gave
    at their next page."""
    return group_mappings.delete_mapping(
        session, name, settings.oidc_roles, principal.actor, utcnow()
    )
