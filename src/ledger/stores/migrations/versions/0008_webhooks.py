"""Webhooks: a durable cursor and a sender's lease per endpoint.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhook_cursors",
        sa.Column("endpoint", sa.String(64), primary_key=True),
        sa.Column("position", BigId, nullable=False, server_default=sa.text("0")),
        sa.Column("holder", sa.String(128), nullable=True),
        sa.Column("lease_until", Stamp, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("last_success_at", Stamp, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_error_at", Stamp, nullable=True),
        sa.CheckConstraint("position >= 0", name="webhook_cursors_position"),
    )


def downgrade() -> None:
    op.drop_table("webhook_cursors")
