"""Initial schema: tokens, assets, labels, scans, raw BOMs, packages, artifacts, summaries.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
SortKey = sa.String(32).with_variant(sa.String(32, collation="C"), "postgresql")
Timestamp = sa.DateTime(timezone=True)
CURRENT_PG = sa.text("is_current")
CURRENT_SQLITE = sa.text("is_current = 1")


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.create_table(
        "api_token",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("asset_patterns", sa.JSON(), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("last_used_at", Timestamp, nullable=True),
        sa.Column("revoked_at", Timestamp, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_token")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_token_token_hash")),
    )
    # asset.latest_scan_id and scan.asset_id reference each other: SQLite accepts the forward
    # reference inline (it cannot add a foreign key later); PostgreSQL gets it after `scan`.
    latest_fk = (
        [
            sa.ForeignKeyConstraint(
                ["latest_scan_id"],
                ["scan.id"],
                name=op.f("fk_asset_latest_scan_id_scan"),
                ondelete="SET NULL",
            )
        ]
        if sqlite
        else []
    )
    op.create_table(
        "asset",
        sa.Column("id", BigId, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("identity", sa.String(255), nullable=False),
        sa.Column("name", sa.String(1024), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("latest_scan_id", BigId, nullable=True),
        sa.Column("latest_scanned_at", Timestamp, nullable=True),
        sa.Column("first_seen", Timestamp, nullable=False),
        sa.Column("last_seen", Timestamp, nullable=False),
        *latest_fk,
        sa.PrimaryKeyConstraint("id", name=op.f("pk_asset")),
        sa.UniqueConstraint("kind", "identity", name=op.f("uq_asset_kind_identity")),
    )
    op.create_index(op.f("ix_asset_kind"), "asset", ["kind"])
    op.create_index(op.f("ix_asset_name"), "asset", ["name"])

    op.create_table(
        "asset_label",
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("value", sa.String(256), nullable=False),
        sa.ForeignKeyConstraint(
            ["asset_id"], ["asset.id"], name=op.f("fk_asset_label_asset_id_asset"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("asset_id", "key", name=op.f("pk_asset_label")),
    )
    op.create_index(op.f("ix_asset_label_key_value"), "asset_label", ["key", "value"])

    op.create_table(
        "asset_library",
        sa.Column("id", BigId, nullable=False),
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("asset_kind", sa.String(16), nullable=False),
        sa.Column("family", sa.String(64), nullable=False),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("version_key", SortKey, nullable=True),
        sa.Column("cuda_major", sa.Integer(), nullable=True),
        sa.Column("file_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["asset_id"],
            ["asset.id"],
            name=op.f("fk_asset_library_asset_id_asset"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_asset_library")),
    )
    op.create_index(op.f("ix_asset_library_asset_id"), "asset_library", ["asset_id"])
    op.create_index(
        op.f("ix_asset_library_family_version_key_asset_id"),
        "asset_library",
        ["family", "version_key", "asset_id"],
    )

    op.create_table(
        "scan",
        sa.Column("id", BigId, nullable=False),
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("dedup_key", sa.String(200), nullable=False),
        sa.Column("serial_number", sa.String(128), nullable=True),
        sa.Column("bom_version", sa.Integer(), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("spec_version", sa.String(8), nullable=False),
        sa.Column("producer", sa.String(32), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("scanned_at", Timestamp, nullable=False),
        sa.Column("received_at", Timestamp, nullable=False),
        sa.Column("library_count", sa.Integer(), nullable=False),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.Column("skipped", sa.JSON(), nullable=False),
        sa.Column("token_id", BigId, nullable=True),
        sa.ForeignKeyConstraint(
            ["asset_id"], ["asset.id"], name=op.f("fk_scan_asset_id_asset"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_token.id"],
            name=op.f("fk_scan_token_id_api_token"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scan")),
        sa.UniqueConstraint("dedup_key", name=op.f("uq_scan_dedup_key")),
    )
    op.create_index(op.f("ix_scan_asset_id_scanned_at"), "scan", ["asset_id", "scanned_at"])
    if not sqlite:
        op.create_foreign_key(
            op.f("fk_asset_latest_scan_id_scan"),
            "asset",
            "scan",
            ["latest_scan_id"],
            ["id"],
            ondelete="SET NULL",
        )

    op.create_table(
        "artifact",
        sa.Column("id", BigId, nullable=False),
        sa.Column("scan_id", BigId, nullable=False),
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("family", sa.String(64), nullable=False),
        sa.Column("component", sa.String(128), nullable=True),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("version_key", SortKey, nullable=True),
        sa.Column("cuda_major", sa.Integer(), nullable=True),
        sa.Column("arch", sa.String(32), nullable=True),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("integrity", sa.String(16), nullable=True),
        sa.Column("integrity_reason", sa.Text(), nullable=True),
        sa.Column("provenance", sa.String(16), nullable=True),
        sa.Column("provenance_signer", sa.Text(), nullable=True),
        sa.Column("provenance_catalog", sa.Text(), nullable=True),
        sa.Column("layer", sa.String(80), nullable=True),
        sa.Column("owner_purl", sa.Text(), nullable=True),
        sa.Column("soname", sa.Text(), nullable=True),
        sa.Column("aliases", sa.JSON(), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["asset_id"], ["asset.id"], name=op.f("fk_artifact_asset_id_asset"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["scan_id"], ["scan.id"], name=op.f("fk_artifact_scan_id_scan"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifact")),
    )
    op.create_index(op.f("ix_artifact_scan_id"), "artifact", ["scan_id"])
    for name, columns in (
        ("ix_artifact_current_asset_id", ["asset_id"]),
        ("ix_artifact_current_sha256", ["sha256", "asset_id"]),
    ):
        op.create_index(
            name, "artifact", columns, postgresql_where=CURRENT_PG, sqlite_where=CURRENT_SQLITE
        )

    op.create_table(
        "package",
        sa.Column("id", BigId, nullable=False),
        sa.Column("scan_id", BigId, nullable=False),
        sa.Column("purl", sa.Text(), nullable=True),
        sa.Column("manager", sa.String(32), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("version", sa.Text(), nullable=True),
        sa.Column("bom_ref", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["scan_id"], ["scan.id"], name=op.f("fk_package_scan_id_scan"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_package")),
    )
    op.create_index(op.f("ix_package_scan_id"), "package", ["scan_id"])

    op.create_table(
        "raw_bom",
        sa.Column("scan_id", BigId, nullable=False),
        sa.Column("media_type", sa.String(128), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("gzip_data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["scan_id"], ["scan.id"], name=op.f("fk_raw_bom_scan_id_scan"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("scan_id", name=op.f("pk_raw_bom")),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint(op.f("fk_asset_latest_scan_id_scan"), "asset", type_="foreignkey")
    for table in ("raw_bom", "package", "artifact", "scan", "asset_library", "asset_label"):
        op.drop_table(table)
    op.drop_table("asset")
    op.drop_table("api_token")
