"""Each bet names the commit that closed it: ``bets.closed_grp``.

Revision ID: 0024
Revises: 0023

``bet_closes`` (commit, bet) lists the bets a commit closed, in its key's order, for the
commit's content. Asked the other way (which commit closed this bet: ``ledger prove``, the
console's bet page), it could only be read whole, one row per bet ever closed. The close's own
update of the bet now writes the commit as well (no index names it, so a close on Postgres stays
a heap-only update), and this revision fills it for the bets closed since 0023 from
``bet_closes``.

The bets' close-once guard refuses any change to a closed bet, so it is lifted for the one
statement that fills the column: on Postgres disabled and enabled again in this transaction, on
SQLite dropped and created again from its own stored text.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

FILL = (
    "UPDATE bets SET closed_grp = (SELECT grp FROM bet_closes WHERE bet_closes.uid = bets.uid) "
    "WHERE uid IN (SELECT uid FROM bet_closes)"
)


def upgrade() -> None:
    op.add_column("bets", sa.Column("closed_grp", sa.BigInteger, nullable=True))
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        op.execute("ALTER TABLE bets DISABLE TRIGGER bets_close_once")
        op.execute(FILL)
        op.execute("ALTER TABLE bets ENABLE TRIGGER bets_close_once")
        return
    guard = connection.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'bets_close_once'"
    ).scalar_one()
    op.execute("DROP TRIGGER bets_close_once")
    op.execute(FILL)
    op.execute(guard)


def downgrade() -> None:
    op.drop_column("bets", "closed_grp")
