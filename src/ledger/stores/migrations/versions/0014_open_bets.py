"""Open holds in a table of their own; on Postgres, room on the bets' pages for their close.

Revision ID: 0014
Revises: 0013

0011's ``bets_open`` was a partial index of the bets on ``state = 'placed'``. An index whose
predicate names the state makes every close of a bet, on Postgres, a full update: the row's new
version goes in with a new entry in each index of ``bets`` (its key, ``bets_pool``,
``bets_user``). Which bets are open now lives in ``open_bets`` (``uid``, ``placed_at``, indexed by
``(placed_at, uid)``), written with the bet and removed by its close in the same transaction; no
index of ``bets`` names a column a close changes, and the bets' pages are half kept free (fill
factor 50, as ``accounts`` and ``users`` since 0012), so that a close is a heap-only update on
the row's own page.

Measured on a settle of 1,000,000 participants on Postgres (``benchmarks/settle_split.py``, the
same book copied from one template): the bets update 7.8 -> 3.2 s of the server's CPU, the
whole settle about 40 -> 31 s. Bets written before this keep their pages packed until those are
rewritten (``VACUUM FULL bets`` in a maintenance window); the migration does not rewrite the
table, which would lock it for as long. SQLite has no heap-only updates and no fill factor:
there the table replaces the partial index at about the same cost.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

OPEN = sa.text("state = 'placed'")


def upgrade() -> None:
    op.create_table(
        "open_bets",
        sa.Column(
            "uid",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("placed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.execute(
        "INSERT INTO open_bets (uid, placed_at) SELECT uid, placed_at FROM bets "
        "WHERE state = 'placed'"
    )
    op.create_index("open_bets_placed", "open_bets", ["placed_at", "uid"])
    op.drop_index("bets_open", table_name="bets")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE bets SET (fillfactor = 50)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE bets RESET (fillfactor)")
    op.create_index(
        "bets_open", "bets", ["placed_at", "uid"], sqlite_where=OPEN, postgresql_where=OPEN
    )
    op.drop_index("open_bets_placed", table_name="open_bets")
    op.drop_table("open_bets")
