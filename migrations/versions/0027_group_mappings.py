"""Group mappings stored by admins: an identity-provider group → a role and, optionally, a team
(besides GPUPROV_OIDC_ROLES, which still maps groups in the configuration).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oidc_group_mapping",
        sa.Column("group_name", sa.String(256), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("team", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("group_name", name=op.f("pk_oidc_group_mapping")),
    )


def downgrade() -> None:
    op.drop_table("oidc_group_mapping")
