"""Advisory matching (issue 19 §3): the NVIDIA products of each asset's latest scan, the
distinct stacks (matcher inputs) assets hold with the feed each was matched against, the
matcher's findings per (stack, CVE, product), and each asset's stack.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "asset_product",
        sa.Column("id", BigId, nullable=False),
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("toolkit", sa.String(64), nullable=True),
        sa.Column("line", sa.String(32), nullable=True),
        sa.Column("branch", sa.String(16), nullable=True),
        sa.Column("paths", sa.JSON(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["asset_id"],
            ["asset.id"],
            name=op.f("fk_asset_product_asset_id_asset"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_asset_product")),
    )
    op.create_index(op.f("ix_asset_product_asset_id"), "asset_product", ["asset_id"])
    op.create_table(
        "advisory_stack",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("matched_at", Timestamp, nullable=False),
        sa.Column("feed_imported_at", Timestamp, nullable=True),
        sa.Column("feed_documents", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_advisory_stack")),
    )
    op.create_table(
        "advisory_finding",
        sa.Column("id", BigId, nullable=False),
        sa.Column("stack", sa.String(64), nullable=False),
        sa.Column("cve", sa.String(64), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("justification", sa.String(64), nullable=True),
        sa.Column("product", sa.String(64), nullable=False),
        sa.Column("component", sa.String(128), nullable=True),
        sa.Column("installed", sa.String(256), nullable=True),
        sa.Column("affected_text", sa.Text(), nullable=True),
        sa.Column("fixed_in", sa.Text(), nullable=True),
        sa.Column("review", sa.Text(), nullable=True),
        sa.Column("inferred", sa.Boolean(), nullable=False),
        sa.Column("conditions_unevaluated", sa.JSON(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["stack"],
            ["advisory_stack.key"],
            name=op.f("fk_advisory_finding_stack_advisory_stack"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_advisory_finding")),
    )
    op.create_index(op.f("ix_advisory_finding_stack_cve"), "advisory_finding", ["stack", "cve"])
    op.create_index(
        op.f("ix_advisory_finding_cve_status_stack"), "advisory_finding", ["cve", "status", "stack"]
    )
    op.create_table(
        "asset_advisory_match",
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("stack", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(
            ["asset_id"],
            ["asset.id"],
            name=op.f("fk_asset_advisory_match_asset_id_asset"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["stack"],
            ["advisory_stack.key"],
            name=op.f("fk_asset_advisory_match_stack_advisory_stack"),
        ),
        sa.PrimaryKeyConstraint("asset_id", name=op.f("pk_asset_advisory_match")),
    )
    op.create_index(
        op.f("ix_asset_advisory_match_stack_asset_id"),
        "asset_advisory_match",
        ["stack", "asset_id"],
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_asset_advisory_match_stack_asset_id"), table_name="asset_advisory_match")
    op.drop_table("asset_advisory_match")
    op.drop_index(op.f("ix_advisory_finding_cve_status_stack"), table_name="advisory_finding")
    op.drop_index(op.f("ix_advisory_finding_stack_cve"), table_name="advisory_finding")
    op.drop_table("advisory_finding")
    op.drop_table("advisory_stack")
    op.drop_index(op.f("ix_asset_product_asset_id"), table_name="asset_product")
    op.drop_table("asset_product")
