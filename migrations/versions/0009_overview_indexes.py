"""The dashboard overview's fleet figures: a covering partial index of the current files' facts
(verdict shares, digest conflicts) and a partial index of the current files that are findings.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FILE = "kind = 'file'"
FINDING = "(provenance = 'conflict' OR integrity IN ('modified', 'unowned'))"


def upgrade() -> None:
    op.create_index(
        "ix_artifact_current_facts",
        "artifact",
        [
            "family",
            "component",
            "version",
            "cuda_major",
            "arch",
            "sha256",
            "integrity",
            "provenance",
        ],
        postgresql_where=sa.text(f"is_current AND {FILE}"),
        sqlite_where=sa.text(f"is_current = 1 AND {FILE}"),
    )
    op.create_index(
        "ix_artifact_current_findings",
        "artifact",
        ["asset_id"],
        postgresql_where=sa.text(f"is_current AND {FINDING}"),
        sqlite_where=sa.text(f"is_current = 1 AND {FINDING}"),
    )


def downgrade() -> None:
    op.drop_index("ix_artifact_current_findings", table_name="artifact")
    op.drop_index("ix_artifact_current_facts", table_name="artifact")
