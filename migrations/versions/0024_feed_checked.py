"""Advisory feed checks: when an import last read each document, changed or not, so an
unchanged scheduled sync keeps the feed's age (the advisories rule's max_feed_age_hours) fresh.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "advisory_document", sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.execute("UPDATE advisory_document SET checked_at = imported_at")


def downgrade() -> None:
    with op.batch_alter_table("advisory_document") as batch:
        batch.drop_column("checked_at")
