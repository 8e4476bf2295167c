"""Package sources: the source package a dpkg package was built from and the source's version
(its ``Source:`` field), which OSV's Debian advisories name.

Revision ID: 0029
Revises: 0027
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("package", sa.Column("source_name", sa.Text(), nullable=True))
    op.add_column("package", sa.Column("source_version", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("package") as batch:
        batch.drop_column("source_version")
        batch.drop_column("source_name")
