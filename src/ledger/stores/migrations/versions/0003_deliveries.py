"""The delivery journal: one row per callback delivery, and its first bet uids for lookups.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.schema.CreateSequence(sa.Sequence("delivery_ids")))
    op.create_table(
        "deliveries",
        sa.Column("id", BigId, primary_key=True, autoincrement=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("request_id", sa.String(255), nullable=True),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("path", sa.String(300), nullable=False),
        sa.Column("client", sa.String(255), nullable=True),
        sa.Column("subject", sa.String(255), nullable=True),
        sa.Column("address", sa.String(64), nullable=True),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("error", sa.String(100), nullable=True),
        sa.Column("bet_count", sa.BigInteger, nullable=False),
        sa.Column("bet_uids", sa.JSON, nullable=False),
        sa.Column("duration_us", sa.BigInteger, nullable=False),
    )
    op.create_index("deliveries_received", "deliveries", ["received_at", "id"])
    op.create_index("deliveries_request", "deliveries", ["request_id"])
    op.create_table(
        "delivery_bets",
        sa.Column("bet_uid", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("delivery_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sqlite_with_rowid=False,
    )
