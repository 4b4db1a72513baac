"""Operators of the console: accounts, sessions and the audit log of their actions.

Revision ID: 0006
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "operators",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("password_hash", sa.Text, nullable=False),
        sa.Column("failed_attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("locked_until", Stamp, nullable=True),
        sa.Column("disabled_at", Stamp, nullable=True),
        sa.Column("created_at", Stamp, nullable=False),
        sa.CheckConstraint("role IN ('viewer', 'cashier', 'admin')", name="operators_role"),
    )
    op.create_table(
        "operator_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column(
            "operator",
            sa.String(64),
            sa.ForeignKey("operators.name", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", Stamp, nullable=False),
        sa.Column("last_seen", Stamp, nullable=False),
    )
    op.create_index("operator_sessions_operator", "operator_sessions", ["operator"])
    op.create_table(
        "operator_audit",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("at", Stamp, nullable=False),
        sa.Column("operator", sa.String(64), nullable=True),
        sa.Column("ip", sa.String(64), nullable=True),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.String(300), nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column("outcome", sa.String(64), nullable=False),
    )
    op.create_index("operator_audit_action", "operator_audit", ["action", "id"])


def downgrade() -> None:
    op.drop_table("operator_audit")
    op.drop_table("operator_sessions")
    op.drop_table("operators")
