"""The verdict filters of the asset list and where-used (API and dashboard): partial indexes of
the current files by integrity and by provenance verdict, with their asset.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENT_PG = sa.text("is_current")
CURRENT_SQLITE = sa.text("is_current = 1")


def upgrade() -> None:
    for column in ("integrity", "provenance"):
        op.create_index(
            f"ix_artifact_current_{column}",
            "artifact",
            [column, "asset_id"],
            postgresql_where=CURRENT_PG,
            sqlite_where=CURRENT_SQLITE,
        )


def downgrade() -> None:
    for column in ("provenance", "integrity"):
        op.drop_index(f"ix_artifact_current_{column}", table_name="artifact")
