"""The dashboard's search by file name: a partial index on the current files' names.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENT_PG = sa.text("is_current")
CURRENT_SQLITE = sa.text("is_current = 1")


def upgrade() -> None:
    op.create_index(
        "ix_artifact_current_name",
        "artifact",
        ["name", "asset_id"],
        postgresql_where=CURRENT_PG,
        sqlite_where=CURRENT_SQLITE,
    )


def downgrade() -> None:
    op.drop_index("ix_artifact_current_name", table_name="artifact")
