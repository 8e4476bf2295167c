"""Promotion policies (versioned), gate decisions (audit), fleet compliance per asset and control.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime(timezone=True)


def _fk(table: str, column: str, target: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        [f"{target}.id"],
        name=op.f(f"fk_{table}_{column}_{target}"),
        ondelete=ondelete,
    )


def upgrade() -> None:
    op.create_table(
        "promotion_policy",
        sa.Column("id", BigId, nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("content_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("created_by", sa.String(128), nullable=True),
        sa.Column("token_id", BigId, nullable=True),
        _fk("promotion_policy", "token_id", "api_token", "SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_promotion_policy")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_promotion_policy_name_version")),
    )
    op.create_table(
        "gate_decision",
        sa.Column("id", BigId, nullable=False),
        sa.Column("decided_at", Timestamp, nullable=False),
        sa.Column("token_id", BigId, nullable=True),
        sa.Column("token_name", sa.String(128), nullable=False),
        sa.Column("policy_name", sa.String(128), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("policy_sha256", sa.String(64), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("subject_kind", sa.String(16), nullable=False),
        sa.Column("subject_name", sa.String(1024), nullable=False),
        sa.Column("subject_digest", sa.String(255), nullable=True),
        sa.Column("asset_id", BigId, nullable=True),
        sa.Column("scan_id", BigId, nullable=True),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("controls", sa.JSON(), nullable=False),
        _fk("gate_decision", "token_id", "api_token", "SET NULL"),
        _fk("gate_decision", "asset_id", "asset", "SET NULL"),
        _fk("gate_decision", "scan_id", "scan", "SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gate_decision")),
    )
    op.create_index(op.f("ix_gate_decision_decided_at"), "gate_decision", ["decided_at"])
    op.create_index(
        op.f("ix_gate_decision_policy_name_decided_at"),
        "gate_decision",
        ["policy_name", "decided_at"],
    )
    op.create_index(
        op.f("ix_gate_decision_subject_digest_decided_at"),
        "gate_decision",
        ["subject_digest", "decided_at"],
    )
    op.create_table(
        "compliance_asset",
        sa.Column("policy_name", sa.String(128), nullable=False),
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("scan_id", BigId, nullable=True),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("scanned_at", Timestamp, nullable=True),
        sa.Column("evaluated_at", Timestamp, nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        _fk("compliance_asset", "asset_id", "asset", "CASCADE"),
        _fk("compliance_asset", "scan_id", "scan", "SET NULL"),
        sa.PrimaryKeyConstraint("policy_name", "asset_id", name=op.f("pk_compliance_asset")),
    )
    op.create_index(op.f("ix_compliance_asset_asset_id"), "compliance_asset", ["asset_id"])
    op.create_table(
        "compliance_control",
        sa.Column("policy_name", sa.String(128), nullable=False),
        sa.Column("asset_id", BigId, nullable=False),
        sa.Column("control_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("scanned_at", Timestamp, nullable=True),
        _fk("compliance_control", "asset_id", "asset", "CASCADE"),
        sa.PrimaryKeyConstraint(
            "policy_name", "asset_id", "control_id", name=op.f("pk_compliance_control")
        ),
    )
    op.create_index(
        op.f("ix_compliance_control_policy_name_control_id_status_scanned_at"),
        "compliance_control",
        ["policy_name", "control_id", "status", "scanned_at"],
    )


def downgrade() -> None:
    for table in ("compliance_control", "compliance_asset", "gate_decision", "promotion_policy"):
        op.drop_table(table)
