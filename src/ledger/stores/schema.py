"""The one schema, in SQLAlchemy Core, shared by every SQL store.

Migrations (:mod:`ledger.stores.migrations`) create exactly these tables plus the dialect's guard
triggers; a test compares a migrated database with this metadata so the two cannot drift apart.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Sequence,
    String,
    Table,
    Text,
)

__all__ = ["accounts", "bets", "metadata", "postings", "transaction_ids", "transactions"]

metadata = MetaData()

# SQLite only auto-assigns ids to a column declared exactly ``INTEGER PRIMARY KEY``.
BigId = BigInteger().with_variant(Integer(), "sqlite")

accounts = Table(
    "accounts",
    metadata,
    Column("name", String(300), primary_key=True),
    Column("currency", String(16), primary_key=True),
    Column("kind", String(16), nullable=False),
    # A running balance kept in the same transaction as the postings, so a debit can be checked
    # against it with one conditional update; `ledger check` proves it equals the postings' sum.
    Column("balance", BigInteger, nullable=False, server_default="0"),
    CheckConstraint("kind IN ('available', 'held', 'house')", name="accounts_kind"),
    # The database's own no-overdraft rule: user money never goes below zero.
    CheckConstraint("kind = 'house' OR balance >= 0", name="accounts_no_overdraft"),
)

# Transaction ids are allocated before the rows are written (postings come first, see below).
# Postgres draws them from this sequence; SQLite, whose writer holds the lock, from max(id).
transaction_ids = Sequence("transaction_ids", metadata=metadata)

transactions = Table(
    "transactions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=False),
    # deposit:<reference> and withdrawal:<reference> (the caller's reference: a re-sent movement
    # meets its own key); hold:<ref>, refund:<ref>:<n> and settle:<ref>:<n> for the bets of one
    # callback request (<ref> fresh per request, <n> its 50,000-bet chunk; a huge Place Bet's
    # chunks are hold:<ref>:<n>). Unique: the database, not the application, guarantees that no
    # movement is applied twice. A bet's own once-only guard is its row (primary key, and a
    # state that leaves 'placed' once), since its legs ride in its request's transaction.
    Column("idempotency_key", String(400), nullable=False, unique=True),
    Column("kind", String(16), nullable=False),
    Column("user_uid", String(255), nullable=True),
    Column("reference", String(300), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

postings = Table(
    "postings",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    # Deferred: postings are written before their transaction row, which seals them (SQLite
    # checks the balance when the transaction row arrives); at commit every posting must have one.
    Column(
        "txn_id",
        BigInteger,
        ForeignKey("transactions.id", deferrable=True, initially="DEFERRED"),
        nullable=False,
    ),
    Column("account", String(300), nullable=False),
    Column("currency", String(16), nullable=False),
    Column("amount", BigInteger, nullable=False),
    # The bet a leg on a user account is for (house legs of a request are summed, untagged).
    Column("bet_uid", BigInteger, nullable=True),
    Index("postings_txn", "txn_id"),
    Index("postings_account", "account", "currency", "id"),
)

bets = Table(
    "bets",
    metadata,
    # The contract's idempotency key: one row per fantasy team, ever.
    Column("uid", BigInteger, primary_key=True, autoincrement=False),
    Column("user_uid", String(255), nullable=False),
    Column("pool_uid", BigInteger, nullable=False),
    Column("currency", String(16), nullable=False),
    Column("amount", BigInteger, nullable=False),
    Column("rake", BigInteger, nullable=False),
    Column("funding", String(16), nullable=False),
    Column("state", String(16), nullable=False),
    Column("payout", BigInteger, nullable=True),
    Column("payout_currency", String(16), nullable=True),
    Column("ticket", Text, nullable=True),
    Column("request_uuid", String(255), nullable=True),
    Column("secrets", JSON, nullable=False),
    Column("placed_at", DateTime(timezone=True), nullable=False),
    Column("closed_at", DateTime(timezone=True), nullable=True),
    CheckConstraint("state IN ('placed', 'refunded', 'settled')", name="bets_state"),
    CheckConstraint("funding IN ('cash', 'ticket', 'free')", name="bets_funding"),
    CheckConstraint("amount >= 0 AND rake >= 0", name="bets_amounts"),
    Index("bets_pool", "pool_uid"),
    Index("bets_user", "user_uid"),
)
