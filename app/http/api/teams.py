"""``/api/v1/teams`` and ``/api/v1/assets/{id}/labels``: teams (members and asset scope) and the
scoping labels admins assign to assets (docs/teams.md). Admin only; every change audited."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, Field

from app.domain import teams
from app.errors import AppError, BadRequest
from app.http.body import read_limited
from app.http.bodylimit import SMALL_BODY_BYTES
from app.http.deps import Admin, SessionDep, WriteSessionDep
from app.http.params import IdPath
from app.http.schemas import error_responses
from scanner.loaders import DocumentError, load_json

router = APIRouter(tags=["teams"])

TeamName = Annotated[
    str,
    Path(min_length=1, max_length=64, pattern=teams.TEAM_NAME_PATTERN, description="the team"),
]
_EXAMPLE: dict[str, Any] = {
    "labels": {"team": "ml"},
    "names": ["ml-*"],
    "users": [{"issuer": "https://login.example.com", "subject": "248289761001"}],
    "groups": ["ml-engineers"],
}


class TeamUser(BaseModel):
    issuer: str = Field(max_length=1024)
    subject: str = Field(max_length=1024)


_LABELS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": 256,
    "propertyNames": {"pattern": teams.LABEL_KEY_PATTERN},
    "additionalProperties": {"type": "string", "pattern": teams.LABEL_VALUE_PATTERN},
}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 1024}
#: the body as the domain checks it (`teams.check_team`): a scope of at least one label or pattern
_TEAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "labels": _LABELS_SCHEMA,
        "names": {
            "type": "array",
            "maxItems": 256,
            "items": {"type": "string", "maxLength": 1024, "pattern": teams.NAME_PATTERN},
        },
        "users": {
            "type": "array",
            "maxItems": 256,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["issuer", "subject"],
                "properties": {"issuer": _TEXT, "subject": _TEXT},
            },
        },
        "groups": {
            "type": "array",
            "maxItems": 256,
            "items": {"type": "string", "minLength": 1, "maxLength": 256},
        },
    },
    "anyOf": [
        {"required": ["labels"], "properties": {"labels": {"minProperties": 1}}},
        {"required": ["names"], "properties": {"names": {"minItems": 1}}},
    ],
    "examples": [_EXAMPLE],
}
_SCOPE_LABELS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["labels"],
    "properties": {"labels": _LABELS_SCHEMA},
    "examples": [{"labels": {"team": "ml", "env": "prod"}}],
}


class TeamOut(BaseModel):
    name: str
    labels: dict[str, str] = Field(examples=[_EXAMPLE["labels"]])
    names: list[str]
    users: list[TeamUser]
    groups: list[str]
    created_at: str
    updated_at: str


class TeamList(BaseModel):
    items: list[TeamOut]


class ScopeLabelsOut(BaseModel):
    asset_id: int
    labels: dict[str, str] = Field(examples=[{"team": "ml", "env": "prod"}])


async def _json(request: Request, what: str) -> Any:
    raw = await read_limited(request, SMALL_BODY_BYTES, ("application/json",), what)
    try:
        return load_json(raw)
    except DocumentError as e:
        raise AppError(f"the body is not acceptable JSON: {e}", 422) from None


async def _team_request(request: Request, _: Admin) -> teams.TeamSpec:
    # read once the caller is known to be an admin, by the one strict JSON reader
    document = await _json(request, "a team")
    if not isinstance(document, dict):
        raise AppError("a team is a JSON object", 422)
    try:
        return teams.check_team(document)
    except BadRequest as e:  # the body's content: 422, as every refused body
        raise AppError(e.message, 422, details=[{"pointer": "/body", "message": e.message}]) from e


async def _labels_request(request: Request, _: Admin) -> dict[str, str]:
    document = await _json(request, "scoping labels")
    try:
        return teams.check_scope_labels(document)
    except BadRequest as e:
        raise AppError(e.message, 422, details=[{"pointer": "/body", "message": e.message}]) from e


@router.put(
    "/teams/{name}",
    status_code=201,
    response_model=TeamOut,
    responses={
        200: {"model": TeamOut, "description": "an existing team replaced"},
        **error_responses(
            (413, "larger than 1 MiB"),
            (415, "not JSON"),
            (422, "not a team this service accepts: the message says why"),
        ),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _TEAM_SCHEMA}},
        }
    },
    summary="Store a team",
)
def put_team(
    principal: Admin,
    name: TeamName,
    spec: Annotated[teams.TeamSpec, Depends(_team_request)],
    session: WriteSessionDep,
    response: Response,
) -> dict[str, Any]:
    """Store (or replace) the team `name`: its members and asset scope (audited). Its members'
    reads are confined to the scope from their next request on."""
    team, created = teams.put_team(session, name, spec, principal.actor)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/api/v1/teams/{name}"
    return teams.team_dict(team)


@router.get("/teams", response_model=TeamList)
def list_teams(_: Admin, session: SessionDep) -> dict[str, Any]:
    """Every team, by name."""
    return {"items": [teams.team_dict(t) for t in teams.list_teams(session)]}


@router.get("/teams/{name}", response_model=TeamOut, responses=error_responses((404, "no team")))
def get_team(_: Admin, session: SessionDep, name: TeamName) -> dict[str, Any]:
    """One team."""
    return teams.team_dict(teams.get_team(session, name))


@router.delete(
    "/teams/{name}",
    response_model=TeamOut,
    responses=error_responses((404, "no team"), (409, "tokens still belong to the team")),
)
def delete_team(principal: Admin, session: WriteSessionDep, name: TeamName) -> dict[str, Any]:
    """Remove a team (answered with it; audited); refused while tokens belong to it."""
    return teams.team_dict(teams.delete_team(session, name, principal.actor))


@router.get(
    "/assets/{asset_id}/labels",
    response_model=ScopeLabelsOut,
    responses=error_responses((404, "no such asset")),
)
def get_scope_labels(_: Admin, session: SessionDep, asset_id: IdPath) -> dict[str, Any]:
    """The scoping labels an admin assigned to the asset."""
    return {"asset_id": asset_id, "labels": teams.scope_labels_of(session, asset_id)}


@router.put(
    "/assets/{asset_id}/labels",
    response_model=ScopeLabelsOut,
    responses=error_responses(
        (404, "no such asset"), (415, "not JSON"), (422, "not labels: the message says why")
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _SCOPE_LABELS_SCHEMA}},
        }
    },
    summary="Assign an asset's scoping labels",
)
def put_scope_labels(
    principal: Admin,
    asset_id: IdPath,
    labels: Annotated[dict[str, str], Depends(_labels_request)],
    session: WriteSessionDep,
) -> dict[str, Any]:
    """Make the asset's scoping labels exactly these (audited): the labels team scopes select
    on, which no report can set or change."""
    assigned = teams.assign_labels(session, asset_id, labels, principal.actor)
    return {"asset_id": asset_id, "labels": assigned}
