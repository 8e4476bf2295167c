"""``/api/v1/gate``: may this image be promoted? Decisions under a stored policy, their audit
records, and the promotion diff between two images.

`POST /gate` takes an image digest (looked up in the inventory) or a CycloneDX BOM (ingested as
`POST /reports` would, then gated) and answers the JSON of `gpuprov gate --format json`. A deny
is a successful answer carrying a decision, not an HTTP error.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.clock import utcnow
from app.domain import gate
from app.domain.tokens import Principal, Scope
from app.errors import Forbidden, InvalidReport
from app.http.api.reports import report_limits
from app.http.body import check_limited, ingest_slot, read_limited
from app.http.deps import (
    CatalogsDep,
    DatabaseDep,
    InventoryReader,
    SessionDep,
    SettingsDep,
    ci_scoped,
)
from app.http.metrics import Metrics
from app.http.params import Limit, Offset, Timestamp, rfc3339
from app.http.schemas import BOM_EXAMPLE, ErrorResponse
from app.http.schemas_policy import GateAnswer, GateDecisionPage, PromotionDiff
from app.settings import Settings
from scanner.loaders import DocumentError, load_json

router = APIRouter(tags=["gate"])

GateCaller = Annotated[Principal, ci_scoped(Scope.GATE)]
_DIGEST = r"^sha256:[0-9a-f]{64}$"
_POLICY_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
ImageDigest = Annotated[str, Query(pattern=_DIGEST, description="an image manifest digest")]


class GateIn(BaseModel):
    """A gate request: a stored policy's name and either an image digest or a BOM."""

    model_config = ConfigDict(extra="forbid")

    policy: str = Field(min_length=1, max_length=128, pattern=_POLICY_NAME)
    image: str | None = Field(default=None, pattern=_DIGEST)
    bom: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_subject(self) -> GateIn:
        if (self.image is None) == (self.bom is None):
            raise ValueError(
                "give exactly one of image (a sha256 digest) or bom (CycloneDX or SPDX 2 JSON)"
            )
        return self


#: `GateIn` as the document states it: the policy's name rule, and exactly one of the subjects
_IMAGE_EXAMPLE = "sha256:1a1c65818a60eb5b920182bc768a7dd5f7ae3a899a8ffd55eaa518e2a8cfb2c2"
_REQUEST_SCHEMA = {
    "type": "object",
    "required": ["policy"],
    "additionalProperties": False,
    "properties": {
        "policy": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": _POLICY_NAME},
        "image": {"type": "string", "pattern": _DIGEST},
        "bom": {
            "type": "object",
            "description": "a CycloneDX 1.4-1.7 JSON BOM, or an SPDX 2.2 / 2.3 JSON document",
        },
    },
    "oneOf": [{"required": ["image"]}, {"required": ["bom"]}],
    "description": "exactly one of image or bom",
}


def _parse(raw: bytes, max_depth: int) -> GateIn:
    try:
        doc = load_json(raw, max_depth=max_depth)
    except DocumentError as e:
        raise InvalidReport(f"the request is not acceptable JSON: {e}") from None
    try:
        return GateIn.model_validate(doc)
    except ValidationError as e:
        details = [
            {
                "pointer": "".join(f"/{p}" for p in err["loc"]),
                "message": str(err["msg"]).removeprefix("Value error, "),
            }
            for err in e.errors()[:10]
        ]
        first = details[0]
        raise InvalidReport(
            f"{first['pointer'] or '(body)'}: {first['message']}", details=details
        ) from None


#: a gate request by image digest (a policy name and a digest): what a token without
#: report:write may send, read without an ingest slot
DIGEST_REQUEST_BYTES = 16 * 1024
_GATE_TYPES = ("application/json",)


async def _gate_body(
    request: Request, settings: SettingsDep, principal: GateCaller
) -> AsyncIterator[bytes]:
    # authorized first; a BOM (up to the report limit) only from a token that may store it,
    # read in an ingest slot; anything else is an image digest request, small and slot-free
    if not principal.has(Scope.REPORT_WRITE):
        what = "a gate request from a token without report:write (an image digest only)"
        yield await read_limited(request, DIGEST_REQUEST_BYTES, _GATE_TYPES, what)
        return
    check_limited(request, settings.max_report_bytes, _GATE_TYPES, "a gate request")
    with ingest_slot(request, principal, settings):
        yield await read_limited(request, settings.max_report_bytes, _GATE_TYPES, "a gate request")


GateBody = Annotated[bytes, Depends(_gate_body, scope="function")]


def _signing(settings: Settings) -> gate.VsaSigning | None:
    # everything signed comes from configuration: the request's Host is the caller's choice
    if settings.vsa_key_file is None:
        return None
    key = gate.read_vsa_key(settings.vsa_key_file, settings.retry_after_seconds)
    return gate.VsaSigning(key, settings.public_url, settings.vsa_verifier_id)


@router.post(
    "/gate",
    response_model=GateAnswer,
    responses={
        code: {"model": ErrorResponse, "description": text}
        for code, text in (
            (
                403,
                "the token lacks the gate scope (and report:write to send a BOM), or is "
                "limited to other policies",
            ),
            (404, "no such policy, or no image with this digest in the inventory"),
            (
                409,
                "the BOM's serial number was stored before with different content, its scan "
                "is not the asset's latest, or the stored policy fails its integrity check",
            ),
            (408, "the body arrived slower than GPUPROV_BODY_MIN_RATE"),
            (
                413,
                "the request is larger than the report size limit (16 KiB from a token "
                "without report:write)",
            ),
            (415, "not JSON"),
            (422, "not a gate request, or the BOM is not acceptable: details say where"),
            (503, "database unavailable, too many reports at once, or the VSA key unreadable"),
        )
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": _REQUEST_SCHEMA,
                    "examples": {
                        "image": {
                            "summary": "an image by the digest of its stored scan",
                            "value": {"policy": "prod", "image": _IMAGE_EXAMPLE},
                        },
                        "bom": {
                            "summary": "a BOM sent with the request",
                            "value": {"policy": "prod", "bom": BOM_EXAMPLE},
                        },
                    },
                }
            },
        }
    },
    summary="Decide whether an image (by digest, or a BOM) may be promoted under a policy",
)
def post_gate(
    principal: GateCaller,
    raw: GateBody,
    request: Request,
    settings: SettingsDep,
    db: DatabaseDep,
    catalogs: CatalogsDep,
) -> dict[str, Any]:
    """allow, warn or deny with every reason and the controls each cites, recorded in the
    decision audit; on allow, with the service's VSA key set, a signed VSA (DSSE)."""
    answer = _gate(principal, raw, settings, db, catalogs, _signing(settings))
    metrics: Metrics = request.app.state.metrics
    metrics.gate_decisions.labels(str(answer.get("decision"))).inc()
    return answer


def _gate(
    principal: Principal,
    raw: bytes,
    settings: Settings,
    db: DatabaseDep,
    catalogs: CatalogsDep,
    signing: gate.VsaSigning | None,
) -> dict[str, Any]:
    body = _parse(raw, settings.max_json_depth + 1)  # +1: the BOM is one level down
    if not principal.may_gate_under(body.policy):
        raise Forbidden(
            f"this token may gate only under the policies {', '.join(principal.policy_names)}; "
            f"not {body.policy!r}"
        )
    now = utcnow()
    if body.image is not None:
        return gate.gate_image(db, principal, body.policy, body.image, now, signing)
    if not principal.has(Scope.REPORT_WRITE):
        raise Forbidden("gating a BOM stores it: the token needs the report:write scope too")
    data = json.dumps(body.bom, separators=(",", ":")).encode()
    return gate.gate_bom(
        db,
        principal,
        body.policy,
        data,
        report_limits(settings),
        catalogs,
        now,
        signing,
        scoping_labels=settings.scoping_labels,
    )


@router.get("/gate/decisions", response_model=GateDecisionPage)
def list_decisions(
    reader: InventoryReader,
    session: SessionDep,
    policy: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    decision: Literal["allow", "warn", "deny"] | None = None,
    subject: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=1024,
            description="an image digest or a subject name",
            json_schema_extra={"pattern": gate.SUBJECT_PATTERN},
        ),
    ] = None,
    since: Timestamp = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict[str, Any]:
    """The recorded gate decisions, newest first (``since``: at or after)."""
    return gate.list_decisions(
        session,
        limit,
        offset,
        policy=policy,
        decision=decision,
        subject=subject,
        since=rfc3339(since, "since"),
        scope=reader.scope,
    )


@router.get(
    "/gate/diff",
    response_model=PromotionDiff,
    responses={404: {"model": ErrorResponse, "description": "no image with one of the digests"}},
)
def promotion_diff(
    reader: InventoryReader,
    session: SessionDep,
    from_: Annotated[str, Query(alias="from", pattern=_DIGEST, description="the image replaced")],
    to: Annotated[str, Query(pattern=_DIGEST, description="the candidate image")],
) -> dict[str, Any]:
    """GPU libraries added, removed, version-changed and digest-changed between two images'
    latest scans (matched by file path)."""
    return gate.diff(session, from_, to, reader.scope)
