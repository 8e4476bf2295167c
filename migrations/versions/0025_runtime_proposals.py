"""Runtime proposals (issue 19 §4, runtime evidence): on a host scanned with ``--runtime``, an
affected finding whose vulnerable library no process mapped over the observed window is proposed
as not_affected / vulnerable_code_not_in_execute_path, with the window and an expiry, for a
person to accept or dismiss; withdrawn when a later report shows the library loaded.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)
#: at most one open proposal per (asset, CVE): the index predicate, spelled as the model's
OPEN = "status IN ('proposed', 'accepted')"


def upgrade() -> None:
    op.create_table(
        "runtime_proposal",
        sa.Column("id", BigId, nullable=False),
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("cve", sa.String(64), nullable=False),
        sa.Column("product", sa.String(64), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("window_start", Timestamp, nullable=False),
        sa.Column("window_end", Timestamp, nullable=False),
        sa.Column("observations", sa.Integer(), nullable=False),
        sa.Column("processes_min", sa.Integer(), nullable=False),
        sa.Column("processes_max", sa.Integer(), nullable=False),
        sa.Column("first_scan_id", BigId, nullable=True),
        sa.Column("last_scan_id", BigId, nullable=True),
        sa.Column("expires_at", Timestamp, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("decided_at", Timestamp, nullable=True),
        sa.Column("decided_by", sa.String(256), nullable=True),
        sa.Column("analysis_id", BigId, nullable=True),
        sa.Column("withdrawn_at", Timestamp, nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["asset_id"],
            ["asset.id"],
            name=op.f("fk_runtime_proposal_asset_id_asset"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["first_scan_id"],
            ["scan.id"],
            name=op.f("fk_runtime_proposal_first_scan_id_scan"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["last_scan_id"],
            ["scan.id"],
            name=op.f("fk_runtime_proposal_last_scan_id_scan"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["analysis_id"],
            ["advisory_analysis.id"],
            name=op.f("fk_runtime_proposal_analysis_id_advisory_analysis"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runtime_proposal")),
    )
    op.create_index(
        op.f("ix_runtime_proposal_asset_id_cve"), "runtime_proposal", ["asset_id", "cve"]
    )
    op.create_index(
        "uq_runtime_proposal_open",
        "runtime_proposal",
        ["asset_id", "cve"],
        unique=True,
        postgresql_where=sa.text(OPEN),
        sqlite_where=sa.text(OPEN),
    )


def downgrade() -> None:
    op.drop_index("uq_runtime_proposal_open", table_name="runtime_proposal")
    op.drop_index(op.f("ix_runtime_proposal_asset_id_cve"), table_name="runtime_proposal")
    op.drop_table("runtime_proposal")
