"""Containers running on hosts, linked to their images (issue 11, images on a node).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "node_container",
        sa.Column("host_id", BigId, nullable=False),
        sa.Column("engine", sa.String(16), nullable=False),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("container_id", sa.String(255), nullable=False),
        sa.Column("image_name", sa.String(1024), nullable=False),
        sa.Column("image_digest", sa.String(80), nullable=True),
        sa.Column("image_config", sa.String(80), nullable=True),
        sa.ForeignKeyConstraint(
            ["host_id"],
            ["asset.id"],
            name=op.f("fk_node_container_host_id_asset"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "host_id", "engine", "namespace", "container_id", name=op.f("pk_node_container")
        ),
    )
    op.create_index(op.f("ix_node_container_image_digest"), "node_container", ["image_digest"])
    op.create_index(op.f("ix_node_container_image_config"), "node_container", ["image_config"])


def downgrade() -> None:
    op.drop_table("node_container")
