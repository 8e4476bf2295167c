"""An asset's gate decisions (its page lists them, the asset list shows the latest under each
policy): an index of the decision records by (asset, policy, id).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        op.f("ix_gate_decision_asset_id_policy_name_id"),
        "gate_decision",
        ["asset_id", "policy_name", "id"],
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_gate_decision_asset_id_policy_name_id"), table_name="gate_decision")
