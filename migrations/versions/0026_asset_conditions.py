"""Host condition facts (issue 19 §3): the facts of each host's latest report that decide
bulletins' conditions (CDI mode, ldconfig, CUDA compat libraries, vGPU guest, GPU
architecture), read by the advisory matcher. The matcher's rules changed with them (the vGPU
guest line, fixes a configuration switches off), so every stored stack is matched again: each
is marked as matched against no feed, and the next report or import matches it anew.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "asset_condition",
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.String(640), nullable=False),
        sa.Column("source", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["asset_id"],
            ["asset.id"],
            name=op.f("fk_asset_condition_asset_id_asset"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("asset_id", "name", name=op.f("pk_asset_condition")),
    )
    # no stack is current any more: matched again, by the new rules, before it is trusted
    op.execute("UPDATE advisory_stack SET feed_documents = -1")


def downgrade() -> None:
    op.drop_table("asset_condition")
    op.execute("UPDATE advisory_stack SET feed_documents = -1")
