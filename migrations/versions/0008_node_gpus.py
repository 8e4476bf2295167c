"""GPUs of hosts (issue 11, driver and GPUs): one row per GPU of a host's latest report.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "node_gpu",
        sa.Column("host_id", BigId, nullable=False),
        sa.Column("bus_id", sa.String(32), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("uuid", sa.String(64), nullable=True),
        sa.Column("minor", sa.Integer(), nullable=True),
        sa.Column("vbios", sa.String(64), nullable=True),
        sa.Column("architecture", sa.String(64), nullable=True),
        sa.Column("compute_capability", sa.String(8), nullable=True),
        sa.ForeignKeyConstraint(
            ["host_id"], ["asset.id"], name=op.f("fk_node_gpu_host_id_asset"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("host_id", "bus_id", name=op.f("pk_node_gpu")),
    )
    op.create_index(op.f("ix_node_gpu_model"), "node_gpu", ["model"])


def downgrade() -> None:
    op.drop_index(op.f("ix_node_gpu_model"), table_name="node_gpu")
    op.drop_table("node_gpu")
