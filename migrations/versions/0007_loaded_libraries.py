"""Loaded libraries: which live processes map each GPU library file (issue 11, runtime).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("artifact") as batch:
        batch.add_column(
            sa.Column("loaded_processes", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(
            sa.Column("loaded_containers", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(
            sa.Column("loaded_deleted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(
            sa.Column("loaded_copy", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("disk_sha256", sa.String(64), nullable=True))
        batch.add_column(
            sa.Column("loaded_by", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
        )
    with op.batch_alter_table("scan") as batch:
        batch.add_column(sa.Column("runtime", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scan") as batch:
        batch.drop_column("runtime")
    with op.batch_alter_table("artifact") as batch:
        for column in (
            "loaded_by",
            "disk_sha256",
            "loaded_copy",
            "loaded_deleted",
            "loaded_containers",
            "loaded_processes",
        ):
            batch.drop_column(column)
