"""A token may be limited to named gate policies: a CI token limited to ``prod`` cannot pick a
laxer stored policy to get a signed PASS. Empty (every token before this revision): any policy.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_token") as batch:
        batch.add_column(
            sa.Column("policy_names", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
        )


def downgrade() -> None:
    with op.batch_alter_table("api_token") as batch:
        batch.drop_column("policy_names")
