"""Keyless CI: trust rules mapping a CI provider's OIDC token claims to rights, the ID tokens
already used for reports (refused on reuse until they expire), and on each gate decision the
rule and claims a CI job was granted on.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ci_trust_rule",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("issuer", sa.String(1024), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "ci_token_use",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(op.f("ix_ci_token_use_expires_at"), "ci_token_use", ["expires_at"])
    with op.batch_alter_table("gate_decision") as batch:
        batch.add_column(sa.Column("granted", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("gate_decision") as batch:
        batch.drop_column("granted")
    op.drop_index(op.f("ix_ci_token_use_expires_at"), table_name="ci_token_use")
    op.drop_table("ci_token_use")
    op.drop_table("ci_trust_rule")
