"""Directory: tournaments and users as the platform describes them.

Revision ID: 0004
Revises: 0002

Two tables, upserted from every callback payload (ledger.directory). An existing database is
backfilled from its bets: each tournament and user they name, with the uid only (the names were
never stored), first seen at its first bet's placement and last seen at its latest placement or
closing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tournaments",
        sa.Column("uid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("currency", sa.String(255), nullable=True),
        sa.Column("category", sa.String(255), nullable=True),
        sa.Column("game_type", sa.String(255), nullable=True),
        sa.Column("status", sa.String(255), nullable=True),
        sa.Column("estimated_end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("uid"),
    )
    op.create_index("tournaments_first_seen", "tournaments", ["first_seen", "uid"])
    op.create_table(
        "users",
        sa.Column("uid", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("client", sa.String(255), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("uid"),
    )
    op.create_index("users_first_seen", "users", ["first_seen", "uid"])
    # Both databases compare their own timestamp forms correctly (SQLite's are one fixed-width
    # text format), so min and max are exact here.
    for table, column in (("tournaments", "pool_uid"), ("users", "user_uid")):
        op.execute(BACKFILL.format(table=table, column=column))


BACKFILL = (
    "INSERT INTO {table} (uid, first_seen, last_seen) "
    "SELECT {column}, min(placed_at), "
    "max(CASE WHEN closed_at > placed_at THEN closed_at ELSE placed_at END) "
    "FROM bets GROUP BY {column}"
)
