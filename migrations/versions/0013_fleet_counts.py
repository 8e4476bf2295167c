"""Fleet-wide current state kept at ingest: how many assets hold each (library, digest) pair of
their current files (digest conflicts) and each (family, version) (version spread, charts), and
each asset's file verdict counts (the overview's verdict shares), backfilled from the current
files and summary.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GROUP = ("family", "component", "version", "cuda_major", "arch", "sha256")
#: as app.storage.repositories.fleet.STRIPES: an asset counts in the row of asset_id % 16
_STRIPES = 16


def _key(pair: Sequence[object]) -> str:
    # as app.storage.repositories.fleet.digest_key (a migration keeps its own copy)
    return hashlib.sha256(json.dumps(list(pair), separators=(",", ":")).encode()).hexdigest()


def upgrade() -> None:
    digests = op.create_table(
        "library_digest",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("stripe", sa.Integer(), nullable=False),
        sa.Column("family", sa.String(length=64), nullable=False),
        sa.Column("component", sa.String(length=128), nullable=True),
        sa.Column("version", sa.String(length=128), nullable=False),
        sa.Column("cuda_major", sa.Integer(), nullable=True),
        sa.Column("arch", sa.String(length=32), nullable=True),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("assets", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "stripe", name=op.f("pk_library_digest")),
    )
    op.create_index(
        "ix_library_digest_group",
        "library_digest",
        ["family", "component", "version", "cuda_major", "arch", "sha256"],
    )
    versions = op.create_table(
        "library_version",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("stripe", sa.Integer(), nullable=False),
        sa.Column("family", sa.String(length=64), nullable=False),
        sa.Column("version", sa.String(length=128), nullable=True),
        sa.Column("assets", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "stripe", name=op.f("pk_library_version")),
    )
    op.create_index(
        "ix_library_version_family_version", "library_version", ["family", "version", "assets"]
    )
    op.create_table(
        "asset_file_verdicts",
        sa.Column(
            "asset_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("integrity_verified", sa.Integer(), nullable=False),
        sa.Column("provenance_verified", sa.Integer(), nullable=False),
        sa.Column("modified", sa.Integer(), nullable=False),
        sa.Column("unowned", sa.Integer(), nullable=False),
        sa.Column("provenance_conflict", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["asset_id"],
            ["asset.id"],
            name=op.f("fk_asset_file_verdicts_asset_id_asset"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("asset_id", name=op.f("pk_asset_file_verdicts")),
    )
    # backfill from the current files
    conn = op.get_bind()
    columns = ", ".join(_GROUP)
    rows = conn.execute(
        sa.text(
            f"SELECT {columns}, asset_id % {_STRIPES}, count(DISTINCT asset_id) FROM artifact "
            "WHERE is_current AND kind = 'file' AND sha256 IS NOT NULL AND version IS NOT NULL "
            f"GROUP BY {columns}, asset_id % {_STRIPES}"
        )
    ).all()
    if rows:
        op.bulk_insert(
            digests,
            [
                {
                    "key": _key(r[:6]),
                    "stripe": r[6],
                    **dict(zip(_GROUP, r[:6], strict=True)),
                    "assets": r[7],
                }
                for r in rows
            ],
        )
    rows = conn.execute(
        sa.text(
            f"SELECT family, version, asset_id % {_STRIPES}, count(DISTINCT asset_id) "
            f"FROM asset_library GROUP BY family, version, asset_id % {_STRIPES}"
        )
    ).all()
    if rows:
        op.bulk_insert(
            versions,
            [
                {"key": _key(r[:2]), "stripe": r[2], "family": r[0], "version": r[1], "assets": r[3]}
                for r in rows
            ],
        )
    op.execute(
        "INSERT INTO asset_file_verdicts (asset_id, files, integrity_verified, "
        "provenance_verified, modified, unowned, provenance_conflict) "
        "SELECT asset_id, count(*), "
        "sum(CASE WHEN integrity = 'verified' THEN 1 ELSE 0 END), "
        "sum(CASE WHEN provenance = 'verified' THEN 1 ELSE 0 END), "
        "sum(CASE WHEN integrity = 'modified' THEN 1 ELSE 0 END), "
        "sum(CASE WHEN integrity = 'unowned' THEN 1 ELSE 0 END), "
        "sum(CASE WHEN provenance = 'conflict' THEN 1 ELSE 0 END) "
        "FROM artifact WHERE is_current AND kind = 'file' GROUP BY asset_id"
    )


def downgrade() -> None:
    op.drop_table("asset_file_verdicts")
    op.drop_index("ix_library_version_family_version", table_name="library_version")
    op.drop_table("library_version")
    op.drop_index("ix_library_digest_group", table_name="library_digest")
    op.drop_table("library_digest")
