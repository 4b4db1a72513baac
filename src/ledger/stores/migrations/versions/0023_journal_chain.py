"""The journal's chain: one record per commit that writes transactions or bets, and the history.

Revision ID: 0023
Revises: 0022

Adds the columns by which rows name the commit that wrote them (``transactions.commit_grp``,
``bets.placed_grp``: the unit of work's event group; NULL for what was written before), which
commit closed each bet (``bet_closes``), the chain (``journal_chain``), its head
(``journal_head``) and the signed checkpoints (``journal_checkpoints``). No existing row is
rewritten (the journal's tables are append-only): the history an existing database holds becomes
the chain's first record, whose content is every row that names no commit, in the canonical
order of ledger.stores.chain (docs/integrity.md). A database with no rows starts with an empty
chain.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from ledger.integrity.canonical import GENESIS
from ledger.stores import chain

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

HASH = sa.String(64)


def upgrade() -> None:
    op.add_column("transactions", sa.Column("commit_grp", sa.BigInteger, nullable=True))
    op.add_column("bets", sa.Column("placed_grp", sa.BigInteger, nullable=True))
    op.create_index("transactions_commit", "transactions", ["commit_grp"])
    op.create_index("bets_placed_commit", "bets", ["placed_grp", "uid"])
    op.create_table(
        "bet_closes",
        sa.Column("grp", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("uid", sa.BigInteger, primary_key=True, autoincrement=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "journal_chain",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("grp", sa.BigInteger, nullable=True, unique=True),
        sa.Column("prev_hash", HASH, nullable=False),
        sa.Column("content_hash", HASH, nullable=False),
        sa.Column("record_hash", HASH, nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("row_count", sa.BigInteger, nullable=False),
    )
    head = op.create_table(
        "journal_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("prev_hash", HASH, nullable=False),
        sa.Column("record_hash", HASH, nullable=False),
    )
    op.create_table(
        "journal_checkpoints",
        sa.Column("size", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("root_hash", HASH, nullable=False),
        sa.Column("note", sa.Text, nullable=False),
        sa.Column("signed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "journal_nodes",
        sa.Column("level", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("idx", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("hash", HASH, nullable=False),
    )
    zero = GENESIS.hex()
    op.bulk_insert(head, [{"id": 1, "seq": 0, "prev_hash": zero, "record_hash": zero}])
    connection = op.get_bind()
    content = chain.commit_content(connection, None)
    if content.rows:
        chain.seal_in_steps(connection, None, content, datetime.now(UTC))


def downgrade() -> None:
    op.drop_table("journal_nodes")
    op.drop_table("journal_checkpoints")
    op.drop_table("journal_head")
    op.drop_table("journal_chain")
    op.drop_table("bet_closes")
    op.drop_index("bets_placed_commit", "bets")
    op.drop_index("transactions_commit", "transactions")
    op.drop_column("bets", "placed_grp")
    op.drop_column("transactions", "commit_grp")
