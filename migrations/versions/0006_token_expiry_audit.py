"""Token expiry and the audit log of administrative actions.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("api_token") as batch:
        batch.add_column(sa.Column("expires_at", Timestamp, nullable=True))
    op.create_table(
        "audit_event",
        sa.Column("id", BigId, nullable=False),
        sa.Column("at", Timestamp, nullable=False),
        sa.Column("source", sa.String(8), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("actor_token_id", BigId, nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(1024), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.ForeignKeyConstraint(
            ["actor_token_id"],
            ["api_token.id"],
            name=op.f("fk_audit_event_actor_token_id_api_token"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_event")),
    )
    op.create_index(op.f("ix_audit_event_at"), "audit_event", ["at"])
    op.create_index(op.f("ix_audit_event_action_at"), "audit_event", ["action", "at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_audit_event_action_at"), table_name="audit_event")
    op.drop_index(op.f("ix_audit_event_at"), table_name="audit_event")
    op.drop_table("audit_event")
    with op.batch_alter_table("api_token") as batch:
        batch.drop_column("expires_at")
