"""A rotated token names its successor, so it cannot be rotated again: a second rotation of a
token in its grace period computed the new token's lifetime from the grace expiry (a
never-expiring token rotated twice came out expiring within the grace).

Tokens rotated before this revision are not marked (the audit log has their rotations).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("api_token") as batch:
        batch.add_column(sa.Column("replaced_by_id", BigId, nullable=True))
        batch.create_foreign_key(
            op.f("fk_api_token_replaced_by_id_api_token"),
            "api_token",
            ["replaced_by_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("api_token") as batch:
        batch.drop_constraint(op.f("fk_api_token_replaced_by_id_api_token"), type_="foreignkey")
        batch.drop_column("replaced_by_id")
