"""Security advisories (issue 19 §1, the feed): documents (current revision per publisher
namespace and tracking id, with source and digest), their vulnerabilities by CVE, and each
product's status with its version text as written and parsed.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "advisory_document",
        sa.Column("id", BigId, nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("publisher_namespace", sa.String(512), nullable=False),
        sa.Column("publisher_name", sa.String(256), nullable=False),
        sa.Column("tracking_id", sa.String(256), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("published_at", Timestamp, nullable=True),
        sa.Column("updated_at", Timestamp, nullable=True),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("source", sa.String(2048), nullable=False),
        sa.Column("digest_mismatch", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("imported_at", Timestamp, nullable=False),
        sa.Column("previous_version", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_advisory_document")),
        sa.UniqueConstraint(
            "publisher_namespace",
            "tracking_id",
            name=op.f("uq_advisory_document_publisher_namespace_tracking_id"),
        ),
    )
    op.create_table(
        "advisory_vulnerability",
        sa.Column("id", BigId, nullable=False),
        sa.Column("document_id", BigId, nullable=False),
        sa.Column("cve", sa.String(64), nullable=False),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("severity", sa.String(16), nullable=True),
        sa.Column("cvss", sa.Float(), nullable=True),
        sa.Column("cvss_vector", sa.String(256), nullable=True),
        sa.Column("cwe", sa.String(32), nullable=True),
        sa.Column("published_at", Timestamp, nullable=True),
        sa.Column("withdrawn_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["advisory_document.id"],
            name=op.f("fk_advisory_vulnerability_document_id_advisory_document"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_advisory_vulnerability")),
        sa.UniqueConstraint(
            "document_id", "cve", name=op.f("uq_advisory_vulnerability_document_id_cve")
        ),
    )
    op.create_index(op.f("ix_advisory_vulnerability_cve"), "advisory_vulnerability", ["cve"])
    op.create_table(
        "advisory_product_status",
        sa.Column("id", BigId, nullable=False),
        sa.Column("vulnerability_id", BigId, nullable=False),
        sa.Column("product_id", sa.String(512), nullable=False),
        sa.Column("product", sa.String(256), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("platform", sa.String(256), nullable=True),
        sa.Column("version_text", sa.Text(), nullable=True),
        sa.Column("parsed", sa.JSON(), nullable=True),
        sa.Column("needs_review", sa.Boolean(), nullable=False),
        sa.Column("vers", sa.JSON(), nullable=False),
        sa.Column("cpe", sa.String(512), nullable=True),
        sa.Column("purls", sa.JSON(), nullable=False),
        sa.Column("hashes", sa.JSON(), nullable=False),
        sa.Column("justification", sa.String(64), nullable=True),
        sa.Column("remediations", sa.JSON(), nullable=False),
        sa.Column("severity", sa.String(16), nullable=True),
        sa.Column("cvss", sa.Float(), nullable=True),
        sa.Column("closed_at", Timestamp, nullable=True),
        sa.Column("closed_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["vulnerability_id"],
            ["advisory_vulnerability.id"],
            name=op.f("fk_advisory_product_status_vulnerability_id_advisory_vulnerability"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_advisory_product_status")),
    )
    op.create_index(
        op.f("ix_advisory_product_status_vulnerability_id"),
        "advisory_product_status",
        ["vulnerability_id"],
    )
    op.create_index(
        op.f("ix_advisory_product_status_product"), "advisory_product_status", ["product"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_advisory_product_status_product"), table_name="advisory_product_status")
    op.drop_index(
        op.f("ix_advisory_product_status_vulnerability_id"), table_name="advisory_product_status"
    )
    op.drop_table("advisory_product_status")
    op.drop_index(op.f("ix_advisory_vulnerability_cve"), table_name="advisory_vulnerability")
    op.drop_table("advisory_vulnerability")
    op.drop_table("advisory_document")
