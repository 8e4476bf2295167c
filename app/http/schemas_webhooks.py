"""Request and answer models of ``/api/v1/webhooks``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic.json_schema import SkipJsonSchema

from app.domain.notifications import EVENTS, SEVERITIES
from app.domain.webhooks import DELIVERY_STATUSES, MAX_FILTER_LABELS, NAME_PATTERN
from app.http.schemas import Page

EventName = Literal[EVENTS]  # type: ignore[valid-type]
Severity = Literal[SEVERITIES]  # type: ignore[valid-type]


class WebhookFilter(BaseModel):
    """Which events of the subscribed types reach the endpoint."""

    model_config = ConfigDict(extra="forbid")

    min_severity: Severity | None = Field(
        default=None,
        description="advisory.affected only: events of a CVE at or above this severity (one "
        "without a severity is sent)",
    )
    labels: dict[
        Annotated[str, StringConstraints(min_length=1, max_length=128)],
        Annotated[str, StringConstraints(max_length=256)],
    ] = Field(
        default_factory=dict,
        max_length=MAX_FILTER_LABELS,
        examples=[{"env": "prod"}],
        description="events about assets: only those carrying every one of these labels "
        "(other assets are left out of the event; none left: no event)",
    )


class WebhookIn(BaseModel):
    """An endpoint to create; the service makes its secret."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="unique; names it in the URLs")
    url: str = Field(
        min_length=1,
        max_length=2048,
        description="https:// only; internal addresses (loopback, private, link-local, CGNAT, "
        "ULA, ...) are refused",
    )
    events: list[EventName] = Field(min_length=1, max_length=len(EVENTS))
    filter: WebhookFilter = Field(default_factory=WebhookFilter)
    #: never accepted (the service makes the secret); named so the refusal says why
    secret: SkipJsonSchema[object] = Field(default=None, exclude=True)

    @field_validator("secret", mode="before")
    @classmethod
    def _no_secret(cls, value: object) -> None:
        raise ValueError(
            "the service generates each endpoint's secret and returns it once, in the answer "
            "to this request; leave it out"
        )


class WebhookOut(BaseModel):
    name: str
    url: str
    events: list[str]
    filter: WebhookFilter
    created_at: str
    enabled: bool = Field(description="false once the receiver answered 410 Gone")
    disabled_at: str | None
    disabled_reason: str | None
    previous_secret_until: str | None = Field(
        description="after a rotation: until when the previous secret signs too"
    )
    deliveries: dict[str, int] = Field(
        description="deliveries by status",
        examples=[{"pending": 1, "delivered": 40, "dead": 0, "cancelled": 0}],
    )


class NewWebhookOut(WebhookOut):
    secret: str = Field(description="whsec_<base64>: the signing secret, shown only in this answer")


class WebhookList(BaseModel):
    items: list[WebhookOut]


class DeliveryOut(BaseModel):
    id: int
    message_id: str = Field(description="the webhook-id header (the same on every retry)")
    event: str
    status: Literal[DELIVERY_STATUSES]  # type: ignore[valid-type]
    attempts: int
    created_at: str
    next_attempt_at: str | None
    last_attempt_at: str | None
    last_status: int | None = Field(description="the receiver's HTTP status, if it answered")
    last_error: str | None = Field(description="why the last attempt failed (never its body)")
    delivered_at: str | None


class DeliveryPage(Page):
    items: list[DeliveryOut]


class TestOut(BaseModel):
    delivered: bool = Field(description="the receiver answered 2xx")
    status: int | None = Field(description="the receiver's HTTP status (its body is not shown)")
    error: str | None = Field(description="why there was no 2xx answer")
