"""Single sign-on for people: users (by the ID token's issuer and subject), their server-side
dashboard sessions, the sign-ins under way, and the signed-in person on audit events.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "app_user",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("issuer", sa.String(1024), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("name", sa.String(256), nullable=True),
        sa.Column("role", sa.String(16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_login_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("issuer", "subject", name=op.f("uq_app_user_issuer_subject")),
    )
    op.create_table(
        "web_session",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column(
            "user_id",
            _ID,
            sa.ForeignKey(
                "app_user.id", ondelete="CASCADE", name=op.f("fk_web_session_user_id_app_user")
            ),
            nullable=False,
        ),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id_token", sa.Text(), nullable=True),
    )
    op.create_index(op.f("ix_web_session_user_id"), "web_session", ["user_id"])
    op.create_index(op.f("ix_web_session_expires_at"), "web_session", ["expires_at"])
    op.create_table(
        "sso_login",
        sa.Column("state_hash", sa.String(64), primary_key=True),
        sa.Column("browser_hash", sa.String(64), nullable=False),
        sa.Column("nonce", sa.String(128), nullable=False),
        sa.Column("code_verifier", sa.String(128), nullable=False),
        sa.Column("next_url", sa.String(2048), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(op.f("ix_sso_login_expires_at"), "sso_login", ["expires_at"])
    with op.batch_alter_table("audit_event") as batch:
        batch.add_column(sa.Column("actor_issuer", sa.String(1024), nullable=True))
        batch.add_column(sa.Column("actor_subject", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_event") as batch:
        batch.drop_column("actor_subject")
        batch.drop_column("actor_issuer")
    op.drop_index(op.f("ix_sso_login_expires_at"), table_name="sso_login")
    op.drop_table("sso_login")
    op.drop_index(op.f("ix_web_session_expires_at"), table_name="web_session")
    op.drop_index(op.f("ix_web_session_user_id"), table_name="web_session")
    op.drop_table("web_session")
    op.drop_table("app_user")
