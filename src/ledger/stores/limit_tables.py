"""The tables of responsible-gambling limits (migration 0021), on the one schema's metadata.

- ``limited_users``: one row per user with a limit or an exclusion, ever. The one read every
  deposit and Place Bet pays (a primary-key probe of the users it debits, under ``FOR UPDATE``
  on Postgres): a user without a row is not limited, and nothing else is read or written for
  them. A row is the lock on the user's limit state: a check and the activity it records, and a
  change of limit, are serialized on it.
- ``limits``: per user, currency, kind and period, the amount in force and a pending change
  (``pending_at`` set: ``pending`` the new amount, NULL for the limit's removal).
- ``limit_changes``: every change asked, who asked, when and when it takes effect (history).
- ``exclusions``: time-outs and self-exclusions (``until`` NULL: indefinite), with who and why.
- ``limit_activity``: what moved a limited user's money (deposited, staked, returned), written
  only for limited users. Bounded: a check reads the range ``(user, currency, at >
  now - 30 days)`` of its index, and rows older than the longest window are pruned
  (``ledger events prune`` runs :class:`ledger.commands.PruneLimitActivity` beside it).
- ``limit_hours`` (migration 0022): the same movements summed per user, currency and clock
  hour, so that a check reads a window in bounded work (:mod:`ledger.stores.limit_hours`).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, DateTime, Index, Integer, String, Table, Text

from .schema import Amount, Key, metadata

__all__ = [
    "exclusions",
    "limit_activity",
    "limit_changes",
    "limit_hours",
    "limited_users",
    "limits",
]

BigId = BigInteger().with_variant(Integer(), "sqlite")

limited_users = Table(
    "limited_users",
    metadata,
    Column("user_uid", Key(255), primary_key=True),
    Column("since", DateTime(timezone=True), nullable=False),
)

limits = Table(
    "limits",
    metadata,
    Column("user_uid", Key(255), primary_key=True),
    Column("currency", Key(16), primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("period", String(16), primary_key=True),
    Column("amount", Amount, nullable=True),
    Column("pending", Amount, nullable=True),
    Column("pending_at", DateTime(timezone=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

limit_changes = Table(
    "limit_changes",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("user_uid", Key(255), nullable=False),
    Column("currency", Key(16), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("period", String(16), nullable=False),
    Column("old", Amount, nullable=True),
    Column("new", Amount, nullable=True),
    Column("asked_at", DateTime(timezone=True), nullable=False),
    Column("effective_at", DateTime(timezone=True), nullable=False),
    Column("by", String(255), nullable=False),
    Column("reason", Text, nullable=True),
    Index("limit_changes_user", "user_uid", "id"),
)

exclusions = Table(
    "exclusions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("user_uid", Key(255), nullable=False),
    Column("starts_at", DateTime(timezone=True), nullable=False),
    Column("until", DateTime(timezone=True), nullable=True),
    Column("reason", Text, nullable=False),
    Column("by", String(255), nullable=False),
    Index("exclusions_user", "user_uid", "id"),
)

limit_activity = Table(
    "limit_activity",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("user_uid", Key(255), nullable=False),
    Column("currency", Key(16), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("deposit", Amount, nullable=False),
    Column("stake", Amount, nullable=False),
    Column("returned", Amount, nullable=False),
    Index("limit_activity_window", "user_uid", "currency", "at"),
    Index("limit_activity_at", "at"),
)

limit_hours = Table(
    "limit_hours",
    metadata,
    Column("user_uid", Key(255), primary_key=True),
    Column("currency", Key(16), primary_key=True),
    Column("hour", DateTime(timezone=True), primary_key=True),
    Column("deposit", Amount, nullable=False),
    Column("stake", Amount, nullable=False),
    Column("returned", Amount, nullable=False),
    Index("limit_hours_hour", "hour"),
)
