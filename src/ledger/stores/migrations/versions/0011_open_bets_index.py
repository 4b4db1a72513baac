"""Open holds: ``bets_open`` keeps only the open bets (a partial index), not every bet.

Revision ID: 0011
Revises: 0010

0005's ``bets_open (state, placed_at, uid)`` served "open holds, oldest first" and the
stale-holds gauge with one range of an index over every bet, ever. Closing a bet moved its entry
to the closed range: an index insertion per bet closed, the largest part of the bets update of a
huge settle after the row itself (Postgres, 1,000,000 bets: four index insertions per row, 13
buffer accesses). Now the index holds the open bets only, by ``(placed_at, uid)``: a close
removes an entry and inserts none, and the index stays as small as the open holds. Both
planners use it for ``state = ?`` bound to 'placed' (Postgres plans with the value; SQLite
prepares again once the value is bound): ``tests/stores/test_operator_books.py`` reads the plans.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

OPEN = sa.text("state = 'placed'")


def upgrade() -> None:
    op.drop_index("bets_open", table_name="bets")
    op.create_index(
        "bets_open", "bets", ["placed_at", "uid"], sqlite_where=OPEN, postgresql_where=OPEN
    )


def downgrade() -> None:
    op.drop_index("bets_open", table_name="bets")
    op.create_index("bets_open", "bets", ["state", "placed_at", "uid"])
