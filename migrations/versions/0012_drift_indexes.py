"""Drift at fleet scale: a partial index of the current files with a disk digest (the
loaded-differs-from-disk list) and (family, version, asset_id) on the summary (version spread, grouped in index order).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_artifact_current_loaded_drift",
        "artifact",
        ["asset_id", "path", "id"],
        postgresql_where=sa.text("is_current AND disk_sha256 IS NOT NULL"),
        sqlite_where=sa.text("is_current = 1 AND disk_sha256 IS NOT NULL"),
    )
    op.create_index(
        "ix_asset_library_family_version_asset_id",
        "asset_library",
        ["family", "version", "asset_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_asset_library_family_version_asset_id", table_name="asset_library")
    op.drop_index("ix_artifact_current_loaded_drift", table_name="artifact")
