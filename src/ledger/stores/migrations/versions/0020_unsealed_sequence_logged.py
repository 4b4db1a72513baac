"""Postgres: ``journal_unsealed``'s identity sequence is logged, so a promoted standby can write.

Revision ID: 0020
Revises: 0019

Migration 0017 made ``journal_unsealed`` unlogged, and with it (Postgres 15 and later) the
sequence of its identity column. A standby keeps no contents of an unlogged relation and rebuilds
it empty when promoted; for that sequence, Postgres 15.18 (Debian 12's) rebuilt a zeroed page:
after a ``patronictl switchover`` or a failover, every ``nextval`` on the new primary failed with
``bad magic number in sequence "journal_unsealed_id_seq": 00000000``, so every write that adds
postings (Place Bet, refund, settle, deposit) failed there (``tests/topology``). A logged
sequence is replicated like any table: the table's rows stay unlogged (they only ever hold
transactions in flight), only the sequence's WAL is added, one record per 32 values.
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER SEQUENCE journal_unsealed_id_seq SET LOGGED")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER SEQUENCE journal_unsealed_id_seq SET UNLOGGED")
