"""Host files the NVIDIA Container Toolkit injects into containers (issue 11, section 3).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "node_injected",
        sa.Column("host_id", BigId, nullable=False),
        sa.Column("host_path", sa.String(1024), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("family", sa.String(64), nullable=True),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("container_paths", sa.JSON(), nullable=False),
        sa.Column("devices", sa.JSON(), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["asset.id"],
            name=op.f("fk_node_injected_host_id_asset"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("host_id", "host_path", name=op.f("pk_node_injected")),
    )
    op.create_index(op.f("ix_node_injected_sha256"), "node_injected", ["sha256"])


def downgrade() -> None:
    op.drop_index(op.f("ix_node_injected_sha256"), table_name="node_injected")
    op.drop_table("node_injected")
