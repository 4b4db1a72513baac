"""The journal's chain's tables (ledger.integrity, migration 0023), on the one schema's metadata.

One record per committed unit of work that wrote transactions or bets, in commit order: its
content hash over the canonical bytes of those rows (docs/integrity.md), the previous record's
hash, and its own (the RFC 6962 leaf of the Merkle tree over the records). Written as the last
statements before commit, under journal_head's row lock (ledger.stores.chain). The rows name
their commit in ``transactions.commit_grp`` and ``bets.placed_grp`` (in :mod:`.schema`), and
in ``bet_closes`` here.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Integer, SmallInteger, String, Table, Text

from .schema import metadata

__all__ = ["bet_closes", "journal_chain", "journal_checkpoints", "journal_head", "journal_nodes"]

journal_chain = Table(
    "journal_chain",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    # The unit of work's event group, which its rows name (NULL: the history before the chain).
    Column("grp", BigInteger, nullable=True, unique=True),
    Column("prev_hash", String(64), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("record_hash", String(64), nullable=False),
    Column("committed_at", DateTime(timezone=True), nullable=False),
    # How many rows the content covers: not hashed, only for verify's report of what differs.
    Column("row_count", BigInteger, nullable=False),
)

# One row (id 1): the last record's number, hash and previous hash; updating it orders the
# records' commits (on Postgres one statement moves it on and inserts the record from it).
journal_head = Table(
    "journal_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("record_hash", String(64), nullable=False),
)

# Which commit closed each bet closed since the chain began (a bet closes once). Not a column of
# bets: an index naming it would make every close on Postgres a full update (see bets).
bet_closes = Table(
    "bet_closes",
    metadata,
    Column("grp", BigInteger, primary_key=True, autoincrement=False),
    Column("uid", BigInteger, primary_key=True, autoincrement=False),
    sqlite_with_rowid=False,
)

# Complete subtrees of the records' Merkle tree, kept so that roots and proofs cost about
# log2(n) reads (ledger.stores.merkle_nodes).
journal_nodes = Table(
    "journal_nodes",
    metadata,
    Column("level", SmallInteger, primary_key=True, autoincrement=False),
    Column("idx", BigInteger, primary_key=True, autoincrement=False),
    Column("hash", String(64), nullable=False),
)

# Signed checkpoints of the records' Merkle tree, as published (ledger.integrity.checkpoints).
journal_checkpoints = Table(
    "journal_checkpoints",
    metadata,
    Column("size", BigInteger, primary_key=True, autoincrement=False),
    Column("root_hash", String(64), nullable=False),
    Column("note", Text, nullable=False),
    Column("signed_at", DateTime(timezone=True), nullable=False),
)
