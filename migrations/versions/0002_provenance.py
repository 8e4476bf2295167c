"""Provenance: trust policy versions, signed reference catalogs and their entries; image trust
facts on scans; the provenance verdict's reason on artifacts.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("scan") as batch:
        batch.add_column(sa.Column("image_signer", sa.Text(), nullable=True))
        batch.add_column(sa.Column("slsa_level", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("slsa_builder", sa.Text(), nullable=True))
        batch.add_column(sa.Column("slsa_source_repo", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column(
                "signature_rejected", sa.JSON(), server_default=sa.text("'[]'"), nullable=False
            )
        )
    with op.batch_alter_table("artifact") as batch:
        batch.add_column(sa.Column("provenance_reason", sa.Text(), nullable=True))

    op.create_table(
        "trust_policy",
        sa.Column("id", BigId, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("signers", sa.JSON(), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=True),
        sa.Column("token_id", BigId, nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_token.id"],
            name=op.f("fk_trust_policy_token_id_api_token"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trust_policy")),
        sa.UniqueConstraint("version", name=op.f("uq_trust_policy_version")),
    )
    op.create_table(
        "reference_catalog",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("format", sa.String(32), nullable=False),
        sa.Column("signer", sa.Text(), nullable=True),
        sa.Column("entry_count", sa.Integer(), nullable=False),
        sa.Column("out_of_scope", sa.Integer(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("rejected_reason", sa.Text(), nullable=True),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("imported_at", Timestamp, nullable=False),
        sa.Column("verified_at", Timestamp, nullable=False),
        sa.Column("imported_by", sa.String(128), nullable=True),
        sa.Column("token_id", BigId, nullable=True),
        sa.Column("gzip_data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_token.id"],
            name=op.f("fk_reference_catalog_token_id_api_token"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reference_catalog")),
        sa.UniqueConstraint("content_sha256", name=op.f("uq_reference_catalog_content_sha256")),
    )
    op.create_table(
        "catalog_entry",
        sa.Column("id", BigId, nullable=False),
        sa.Column("catalog_id", BigId, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("basename", sa.String(255), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("family", sa.String(64), nullable=True),
        sa.Column("component", sa.String(128), nullable=True),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("cuda_major", sa.Integer(), nullable=True),
        sa.Column("arch", sa.String(32), nullable=True),
        sa.Column("package", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["catalog_id"],
            ["reference_catalog.id"],
            name=op.f("fk_catalog_entry_catalog_id_reference_catalog"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_catalog_entry")),
        sa.UniqueConstraint(
            "catalog_id", "position", name=op.f("uq_catalog_entry_catalog_id_position")
        ),
    )


def downgrade() -> None:
    for table in ("catalog_entry", "reference_catalog", "trust_policy"):
        op.drop_table(table)
    with op.batch_alter_table("artifact") as batch:
        batch.drop_column("provenance_reason")
    with op.batch_alter_table("scan") as batch:
        for column in (
            "signature_rejected",
            "slsa_source_repo",
            "slsa_builder",
            "slsa_level",
            "image_signer",
        ):
            batch.drop_column(column)
