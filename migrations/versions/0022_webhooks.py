"""Webhooks (issue 19 §5): endpoints with their signing secrets, and the outbox of deliveries.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhook_endpoint",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("filter", sa.JSON(), nullable=False),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("previous_secret", sa.String(128), nullable=True),
        sa.Column("previous_until", Timestamp, nullable=True),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("disabled_at", Timestamp, nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoint")),
        sa.UniqueConstraint("name", name=op.f("uq_webhook_endpoint_name")),
    )
    op.create_table(
        "webhook_delivery",
        sa.Column("id", BigId, nullable=False),
        sa.Column("endpoint_id", BigId, nullable=False),
        sa.Column("message_id", sa.String(64), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", Timestamp, nullable=False),
        sa.Column("last_attempt_at", Timestamp, nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivered_at", Timestamp, nullable=True),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoint.id"],
            name=op.f("fk_webhook_delivery_endpoint_id_webhook_endpoint"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_delivery")),
        sa.UniqueConstraint(
            "endpoint_id", "message_id", name=op.f("uq_webhook_delivery_endpoint_id_message_id")
        ),
    )
    op.create_index(
        op.f("ix_webhook_delivery_status_next_attempt_at"),
        "webhook_delivery",
        ["status", "next_attempt_at"],
    )
    op.create_index(
        op.f("ix_webhook_delivery_endpoint_id_id"), "webhook_delivery", ["endpoint_id", "id"]
    )


def downgrade() -> None:
    op.drop_table("webhook_delivery")
    op.drop_table("webhook_endpoint")
