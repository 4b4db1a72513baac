"""The event feed: events appended with each change, numbered in commit order at commit.

Revision ID: 0007
Revises: 0006

``events`` holds the rows (keyed by their transaction's group and their place in it),
``event_commits`` each group's ids and commit time, ``event_counter`` the last id given out (one
row, created here). See ledger.stores.events for how the ids follow commit order.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# Money as the other money columns hold it: NUMERIC on Postgres, BLOB affinity on SQLite
# (an INTEGER, or the decimal text of a value beyond 64 bits; never a REAL).
Money = sa.Numeric().with_variant(sa.BLOB(), "sqlite")
MONEY = ("amount", "rake", "payout")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute(sa.schema.CreateSequence(sa.Sequence("event_groups")))
        checks = [
            sa.CheckConstraint(
                f"{name} = trunc({name}) AND abs({name}) <= {10**38 - 1}",
                name=f"events_{name}_exact",
            )
            for name in MONEY
        ]
    else:
        checks = [
            sa.CheckConstraint(
                f"{name} IS NULL OR typeof({name}) IN ('integer', 'text')",
                name=f"events_{name}_exact",
            )
            for name in MONEY
        ]
    op.create_table(
        "events",
        sa.Column("grp", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("ordinal", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("user_uid", sa.String(255), nullable=False),
        sa.Column("pool_uid", sa.BigInteger, nullable=True),
        sa.Column("bet_uid", sa.BigInteger, nullable=True),
        sa.Column("currency", sa.String(16), nullable=False),
        sa.Column("amount", Money, nullable=False),
        sa.Column("rake", Money, nullable=True),
        sa.Column("payout", Money, nullable=True),
        sa.Column("payout_currency", sa.String(16), nullable=True),
        sa.Column("reference", sa.String(300), nullable=True),
        sa.Column("request_id", sa.String(255), nullable=True),
        *checks,
        sqlite_with_rowid=False,
    )
    op.create_table(
        "event_commits",
        sa.Column("grp", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("first_id", sa.BigInteger, nullable=False),
        sa.Column("last_id", sa.BigInteger, nullable=False, unique=True),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("event_commits_committed", "event_commits", ["committed_at"])
    counter = op.create_table(
        "event_counter",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("last_id", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(counter, [{"id": 1, "last_id": 0}])
