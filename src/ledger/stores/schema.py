"""The one schema, in SQLAlchemy Core, shared by every SQL store.

Migrations (:mod:`ledger.stores.migrations`) create exactly these tables plus the dialect's guard
triggers; a test compares a migrated database with this metadata so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BLOB,
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    Sequence,
    String,
    Table,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.types import TypeEngine

__all__ = [
    "CAPACITY",
    "INT64_MAX",
    "INT64_MIN",
    "Amount",
    "accounts",
    "bets",
    "deliveries",
    "delivery_bets",
    "delivery_ids",
    "event_commits",
    "event_counter",
    "event_groups",
    "events",
    "from_stored",
    "metadata",
    "open_bets",
    "operator_audit",
    "operator_failures",
    "operator_sessions",
    "operators",
    "postings",
    "to_stored",
    "tournaments",
    "transaction_ids",
    "transactions",
    "users",
    "webhook_cursors",
]

metadata = MetaData()

# --- money columns ------------------------------------------------------------------------------
#
# Every amount and balance is an exact integer of the currency's minor unit, of up to 38 digits
# on every store. Postgres: NUMERIC, with a CHECK (``<table>_<column>_exact``) that admits
# integers of at most 38 digits only; NUMERIC(38, 0) would silently round a fraction written by
# hand. SQLite, whose integers are 64-bit: an INTEGER while the value fits and its canonical
# decimal text beyond (no leading zero, ``-`` for negatives), in a column of BLOB affinity so
# that SQLite never converts either (INTEGER or NUMERIC affinity would turn wide text into a
# REAL: an inexact balance); its CHECKs admit nothing else, and SQLite adds these values only in
# Python or in the exact ``ledger_sum`` aggregate (ledger.stores.sqlite), never with its own
# ``+`` or ``SUM``, which overflow. The CHECKs are the migration's (0002), per database.

CAPACITY = 10**38 - 1
"""The largest magnitude of any stored amount or balance; beyond it the store refuses (422)."""

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def to_stored(value: int) -> int | str:
    """A value as SQLite stores it: the integer while it fits 64 bits, else its decimal text."""
    return value if INT64_MIN <= value <= INT64_MAX else str(value)


def from_stored(value: Any) -> int:
    """An amount read back: SQLite's integer or text, Postgres' ``Decimal``, as an integer."""
    return value if value.__class__ is int else int(value)


class _SqliteAmount(BLOB):
    """SQLite's side of :class:`Amount`: declared BLOB (for the affinity), values passed as is."""

    def bind_processor(self, dialect: Dialect) -> None:
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        return None


class Amount(TypeDecorator[int]):
    """An exact integer amount of minor units, up to 38 digits, read and written as ``int``."""

    impl = Numeric()
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(_SqliteAmount())
        return dialect.type_descriptor(Numeric())

    def process_bind_param(self, value: int | None, dialect: Dialect) -> Any:
        if value is None or dialect.name != "sqlite":
            return value
        return to_stored(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        return None if value is None else from_stored(value)


def Key(length: int) -> TypeEngine[str]:
    """Text that is a key: compared byte by byte on Postgres (``COLLATE "C"``, migration 0015),
    where the default collation went through ``strcoll`` for every index step, sort and hash
    of a huge close; byte order of UTF-8 is Python's ``sorted()`` order. SQLite's is already."""
    return String(length).with_variant(String(length, collation="C"), "postgresql")


# SQLite only auto-assigns ids to a column declared exactly ``INTEGER PRIMARY KEY``.
BigId = BigInteger().with_variant(Integer(), "sqlite")

accounts = Table(
    "accounts",
    metadata,
    Column("name", Key(300), primary_key=True),
    Column("currency", Key(16), primary_key=True),
    Column("kind", String(16), nullable=False),
    # A running balance kept in the same transaction as the postings, so a debit can be checked
    # against it with one conditional update; `ledger check` proves it equals the postings' sum.
    Column("balance", Amount, nullable=False, server_default=text("0")),
    CheckConstraint("kind IN ('available', 'held', 'house')", name="accounts_kind"),
    # The database's own no-overdraft rule: user money never goes below zero. (On SQLite the
    # migration writes this and bets_amounts sign-aware, for the text form of wide values.)
    CheckConstraint("kind = 'house' OR balance >= 0", name="accounts_no_overdraft"),
    # On Postgres, migration 0012 leaves room on each page for a balance's next version
    # (fillfactor 50): heap-only updates. Not said here as `postgresql_with`, which makes
    # SQLAlchemy import its Postgres dialect for every SQLite user (30 ms of each command).
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
    # The commit that wrote it (its event group, ``journal_chain.grp``; NULL: written before the
    # journal's chain began, covered by its first record). Migration 0023.
    Column("commit_grp", BigInteger, nullable=True),
    # Period summaries (`ledger house`) read a range of time (migration 0005).
    Index("transactions_created", "created_at"),
    Index("transactions_commit", "commit_grp"),
)

# What exists on Postgres only (migration 0017), outside this metadata: the table in which each
# INSERT into postings notes its transactions for the check at commit that replaces the postings'
# foreign key there (kept on SQLite, and here).
POSTGRES_ONLY_TABLES = ("journal_unsealed",)

postings = Table(
    "postings",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    # Deferred: postings are written before their transaction row, which seals them (SQLite
    # checks the balance when the transaction row arrives); at commit every posting must have one.
    # On SQLite this foreign key says so; on Postgres (migration 0017) each INSERT's transactions
    # are checked at commit in one go (POSTGRES_ONLY_TABLES), a key's check per row costing seconds.
    Column(
        "txn_id",
        BigInteger,
        ForeignKey("transactions.id", deferrable=True, initially="DEFERRED"),
        nullable=False,
    ),
    Column("account", Key(300), nullable=False),
    Column("currency", Key(16), nullable=False),
    Column("amount", Amount, nullable=False),
    # The bet a leg on a user account is for (house legs of a request are summed, untagged).
    Column("bet_uid", BigInteger, nullable=True),
    # The account's balance after this posting, written by post() in the same transaction (user
    # and house accounts alike); `ledger check` proves each one. Nullable only because SQLite
    # cannot add a NOT NULL column (migration 0005); never NULL once written.
    Column("balance_after", Amount, nullable=True),
    Index("postings_txn", "txn_id"),
    Index("postings_account", "account", "currency", "id"),
)

bets = Table(
    "bets",
    metadata,
    # The contract's idempotency key: one row per fantasy team, ever.
    Column("uid", BigInteger, primary_key=True, autoincrement=False),
    Column("user_uid", Key(255), nullable=False),
    Column("pool_uid", BigInteger, nullable=False),
    Column("currency", String(16), nullable=False),
    Column("amount", Amount, nullable=False),
    Column("rake", Amount, nullable=False),
    Column("funding", String(16), nullable=False),
    Column("state", String(16), nullable=False),
    Column("payout", Amount, nullable=True),
    Column("payout_currency", String(16), nullable=True),
    Column("ticket", Text, nullable=True),
    Column("request_uuid", String(255), nullable=True),
    Column("secrets", JSON, nullable=False),
    Column("placed_at", DateTime(timezone=True), nullable=False),
    Column("closed_at", DateTime(timezone=True), nullable=True),
    # The commit that placed it (``journal_chain.grp``; NULL: before the chain began). Migration
    # 0023. Which bets a commit closed is in bet_closes, keyed by the commit.
    Column("placed_grp", BigInteger, nullable=True),
    # The commit that closed it (NULL: open, or closed before the chain began), written by the
    # close's own update: a bet's proof finds its closing commit from the bet's row, where
    # bet_closes (keyed by commit) would be read whole. No index names it. Migration 0024.
    Column("closed_grp", BigInteger, nullable=True),
    CheckConstraint("state IN ('placed', 'refunded', 'settled')", name="bets_state"),
    CheckConstraint("funding IN ('cash', 'ticket', 'free')", name="bets_funding"),
    CheckConstraint("amount >= 0 AND rake >= 0", name="bets_amounts"),
    Index("bets_pool", "pool_uid"),
    Index("bets_user", "user_uid"),
    Index("bets_placed_commit", "placed_grp", "uid"),
    # No index names a column a close changes (state, payout, closed_at): on Postgres a close
    # is then a heap-only update, the new version on the row's own page (fill factor 50,
    # migration 0014) and no index touched. Which bets are open lives in open_bets.
)

# Open holds: one row per bet still placed, written with the bet and removed by its close, in
# the same transaction (every writer of bets: ledger.stores.sql, the dialects' close_bet_rows,
# ledger.stores.closing). It serves "open holds, oldest first" and the stale-holds gauge with
# one range of open_bets_placed; ``ledger audit`` proves it is exactly the placed bets. Before
# migration 0014 this was a partial index of bets on ``state = 'placed'``: an index naming the
# state made every close on Postgres a full update, a new entry in each index of bets.
open_bets = Table(
    "open_bets",
    metadata,
    Column("uid", BigId, primary_key=True, autoincrement=False),
    Column("placed_at", DateTime(timezone=True), nullable=False),
    Index("open_bets_placed", "placed_at", "uid"),
)

# --- the delivery journal (ledger.deliveries) -----------------------------------------------------
#
# Not part of the books: a record of what the platform sent and what it was answered. A 2xx row
# is written in the transaction of its effects; rows past the retention are pruned.

# Delivery ids are allocated before the rows are written, like transaction ids, so that a batch
# of rows and their bet links go in as two bulk inserts.
delivery_ids = Sequence("delivery_ids", metadata=metadata)

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=False),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Column("request_id", String(255), nullable=True),
    Column("event", String(64), nullable=False),
    Column("path", String(300), nullable=False),
    Column("client", String(255), nullable=True),
    Column("subject", String(255), nullable=True),
    Column("address", String(64), nullable=True),
    Column("status", Integer, nullable=False),
    Column("error", String(100), nullable=True),
    Column("bet_count", BigInteger, nullable=False),
    Column("bet_uids", JSON, nullable=False),  # the first 20, for display
    Column("duration_us", BigInteger, nullable=False),
    # Newest first, keyset-paged on (received_at, id); also serves since/until and pruning.
    Index("deliveries_received", "received_at", "id"),
    Index("deliveries_request", "request_id"),
)

# The first 20 bet uids of each delivery, one row each: finding a bet's deliveries is an index
# range scan on both stores (a JSON list would need a store-specific index, or a full scan).
# The primary key is the only index (on SQLite the table itself, WITHOUT ROWID): every link is
# one b-tree entry, which keeps the journal cheap. Pruning finds a row's links by the same key,
# from the uids the row lists.
delivery_bets = Table(
    "delivery_bets",
    metadata,
    Column("bet_uid", BigInteger, primary_key=True, autoincrement=False),
    Column("delivery_id", BigInteger, primary_key=True, autoincrement=False),
    sqlite_with_rowid=False,
)


# --- the directory: tournaments and users as the platform describes them (ledger.directory) ---
#
# Upserted from every callback payload in the request's own unit of work. Lists page newest
# first on (first_seen, uid), which never changes once written: a page boundary stays put while
# the table is being written. Entries per state are counted from ``bets`` on read, never kept
# in a counter row that every Place Bet would have to update.

tournaments = Table(
    "tournaments",
    metadata,
    Column("uid", BigInteger, primary_key=True, autoincrement=False),
    Column("name", String(255), nullable=True),
    Column("currency", String(255), nullable=True),
    Column("category", String(255), nullable=True),
    Column("game_type", String(255), nullable=True),
    Column("status", String(255), nullable=True),
    Column("estimated_end_time", DateTime(timezone=True), nullable=True),
    Column("first_seen", DateTime(timezone=True), nullable=False),
    Column("last_seen", DateTime(timezone=True), nullable=False),
    Index("tournaments_first_seen", "first_seen", "uid"),
)

users = Table(
    "users",
    metadata,
    Column("uid", Key(255), primary_key=True),
    Column("name", String(255), nullable=True),
    Column("client", String(255), nullable=True),
    Column("first_seen", DateTime(timezone=True), nullable=False),
    Column("last_seen", DateTime(timezone=True), nullable=False),
    Index("users_first_seen", "first_seen", "uid"),
    # fillfactor 50 on Postgres (migration 0012), as accounts.
)

# --- the console's operators (migration 0006) ---------------------------------------------------

operators = Table(
    "operators",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("role", String(16), nullable=False),
    # scrypt, in the self-describing text form of ledger.operators.hash_password.
    Column("password_hash", Text, nullable=False),
    # No longer written (migration 0019): failures are counted per address in operator_failures.
    Column("failed_attempts", Integer, nullable=False, server_default=text("0")),
    Column("locked_until", DateTime(timezone=True), nullable=True),
    Column("disabled_at", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("role IN ('viewer', 'cashier', 'admin')", name="operators_role"),
)

operator_sessions = Table(
    "operator_sessions",
    metadata,
    # The SHA-256 of the cookie's token: a copy of this table opens no session.
    Column("token_hash", String(64), primary_key=True),
    Column(
        "operator",
        String(64),
        ForeignKey("operators.name", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("csrf", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("last_seen", DateTime(timezone=True), nullable=False),
    Index("operator_sessions_operator", "operator"),
)

# Failed sign-ins per operator and client address (migration 0019): incremented in one statement
# before the password is checked; ledger.operators decides the lock from the new count.
operator_failures = Table(
    "operator_failures",
    metadata,
    Column("operator", String(64), primary_key=True),
    Column("address", String(64), primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("locked_until", DateTime(timezone=True), nullable=True),
    Column("last_at", DateTime(timezone=True), nullable=False),
)

# Append-only (migration 0019): UPDATE and DELETE are refused by triggers, as the journal's.
operator_audit = Table(
    "operator_audit",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    # Who: the operator, or the name tried by a failed sign-in (which may name nobody).
    Column("operator", String(64), nullable=True),
    Column("ip", String(64), nullable=True),
    Column("action", String(32), nullable=False),
    # What: the action's subject (a user, a reference, an operator) and its details as JSON text.
    Column("target", String(300), nullable=True),
    Column("detail", Text, nullable=True),
    # "ok", or the error key that refused it.
    Column("outcome", String(64), nullable=False),
    Index("operator_audit_action", "action", "id"),
)


# --- the event feed (ledger.events, migration 0007) ---------------------------------------------
#
# Appended in the transaction of the change they describe. An event row is keyed by its
# transaction's group (``grp``, taken once per transaction) and its place in it (``ordinal``);
# its public id is ``first_id + ordinal`` of the group's ``event_commits`` row, written with ids
# from ``event_counter`` as the last statement before commit (ledger.stores.events): so ids are
# contiguous and follow commit order, and a huge settle's rows are written once, as they come,
# never renumbered under the counter's lock.

# Postgres draws group keys from this sequence (any order will do: they only join the rows);
# SQLite, whose writer holds the lock, from max(grp) + 1.
event_groups = Sequence("event_groups", metadata=metadata)

events = Table(
    "events",
    metadata,
    Column("grp", BigInteger, primary_key=True, autoincrement=False),
    Column("ordinal", BigInteger, primary_key=True, autoincrement=False),
    Column("type", String(32), nullable=False),
    Column("user_uid", String(255), nullable=False),
    Column("pool_uid", BigInteger, nullable=True),
    Column("bet_uid", BigInteger, nullable=True),
    Column("currency", String(16), nullable=False),
    Column("amount", Amount, nullable=False),
    Column("rake", Amount, nullable=True),
    Column("payout", Amount, nullable=True),
    Column("payout_currency", String(16), nullable=True),
    Column("reference", String(300), nullable=True),
    Column("request_id", String(255), nullable=True),
    sqlite_with_rowid=False,
)

event_commits = Table(
    "event_commits",
    metadata,
    Column("grp", BigInteger, primary_key=True, autoincrement=False),
    # The group's events are ids first_id .. last_id (ordinal 0 is first_id); readers range
    # over last_id, whose order is first_id's.
    Column("first_id", BigInteger, nullable=False),
    Column("last_id", BigInteger, nullable=False, unique=True),
    Column("committed_at", DateTime(timezone=True), nullable=False),
    # Pruning takes the oldest groups first.
    Index("event_commits_committed", "committed_at"),
)

# One row (id 1): the last event id given out. Updated as the last statement of a transaction
# with events, its row lock (Postgres) orders their commits; a rolled-back transaction's update
# is rolled back with it, so ids have no gaps.
event_counter = Table(
    "event_counter",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("last_id", BigInteger, nullable=False),
)

# --- webhooks: one cursor and one lease per endpoint (migration 0008) --------------------------

webhook_cursors = Table(
    "webhook_cursors",
    metadata,
    Column("endpoint", String(64), primary_key=True),
    # The id of the last event the endpoint answered 2xx for (or passed over, its type being
    # unwanted): delivery resumes after it. Written only after a 2xx.
    Column("position", BigId, nullable=False, server_default=text("0")),
    # The sender that may post to this endpoint until lease_until (ledger.webhooks).
    Column("holder", String(128), nullable=True),
    Column("lease_until", DateTime(timezone=True), nullable=True),
    # Failed posts of the batch in flight; back to 0 on a 2xx.
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("last_success_at", DateTime(timezone=True), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("last_error_at", DateTime(timezone=True), nullable=True),
    CheckConstraint("position >= 0", name="webhook_cursors_position"),
)
