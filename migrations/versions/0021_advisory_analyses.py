"""Advisory analyses (issue 19 §4): a triage decision per (CVE, asset or label selector) with
its OpenVEX state, justification, detail, expiry, author and source.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "advisory_analysis",
        sa.Column("id", BigId, nullable=False),
        sa.Column("cve", sa.String(64), nullable=False),
        sa.Column("asset_id", BigId, nullable=True),
        sa.Column("selector", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(24), nullable=False),
        sa.Column("justification", sa.String(64), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("expires_at", Timestamp, nullable=True),
        sa.Column("author", sa.String(256), nullable=False),
        sa.Column("source", sa.String(512), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.ForeignKeyConstraint(
            ["asset_id"],
            ["asset.id"],
            name=op.f("fk_advisory_analysis_asset_id_asset"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_advisory_analysis")),
    )
    op.create_index(
        op.f("ix_advisory_analysis_cve_asset_id"), "advisory_analysis", ["cve", "asset_id"]
    )
    op.create_index(op.f("ix_advisory_analysis_asset_id"), "advisory_analysis", ["asset_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_advisory_analysis_asset_id"), table_name="advisory_analysis")
    op.drop_index(op.f("ix_advisory_analysis_cve_asset_id"), table_name="advisory_analysis")
    op.drop_table("advisory_analysis")
