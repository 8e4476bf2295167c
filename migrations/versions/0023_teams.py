"""Teams and asset scopes: teams (members, scoping labels, name patterns), the scoping labels
admins assign to assets, a token's team and a user's last groups.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "team",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("names", sa.JSON(), nullable=False),
        sa.Column("users", sa.JSON(), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("name", name=op.f("uq_team_name")),
    )
    op.create_table(
        "asset_scope_label",
        sa.Column(
            "asset_id",
            _ID,
            sa.ForeignKey(
                "asset.id", ondelete="CASCADE", name=op.f("fk_asset_scope_label_asset_id_asset")
            ),
            primary_key=True,
        ),
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("value", sa.String(256), nullable=False),
    )
    op.create_index(op.f("ix_asset_scope_label_key_value"), "asset_scope_label", ["key", "value"])
    with op.batch_alter_table("api_token") as batch:
        batch.add_column(sa.Column("team_id", _ID, nullable=True))
        batch.create_foreign_key(
            op.f("fk_api_token_team_id_team"), "team", ["team_id"], ["id"], ondelete="RESTRICT"
        )
        batch.create_index(op.f("ix_api_token_team_id"), ["team_id"])
    with op.batch_alter_table("app_user") as batch:
        batch.add_column(
            sa.Column("groups", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
        )


def downgrade() -> None:
    with op.batch_alter_table("app_user") as batch:
        batch.drop_column("groups")
    with op.batch_alter_table("api_token") as batch:
        batch.drop_index(op.f("ix_api_token_team_id"))
        batch.drop_constraint(op.f("fk_api_token_team_id_team"), type_="foreignkey")
        batch.drop_column("team_id")
    op.drop_index(op.f("ix_asset_scope_label_key_value"), table_name="asset_scope_label")
    op.drop_table("asset_scope_label")
    op.drop_table("team")
