"""A decision's reads in one round trip (the accounts locked, then the bets), and the writes of
balances the unit of work locked and follows (:class:`~ledger.stores.dialect.BalanceMemo`).

Invariant: a balance is computed in Python only from a value this transaction read under its
own row lock (``FOR UPDATE``, in key order); any other is written by the plain statement.
Tested by tests/stores/test_balance_memo.py and tests/stores/test_postgres_batching.py."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
)

from ...errors import (
    CapacityExceeded,
)
from ..dialect import BalanceMemo
from ..queries import BET_SELECT
from ..schema import CAPACITY
from . import pipeline
from .arrays import BULK_ROWS, Array, Numerics, Texts
from .pipeline import defer

BETS = f"SELECT {BET_SELECT} FROM bets WHERE uid = ANY(%b::bigint[])"  # noqa: S608


BALANCES = (
    "SELECT a.name, a.currency, a.balance FROM accounts a "
    "JOIN unnest(%b::text[], %b::text[]) AS v(name, currency) "
    "ON a.name = v.name AND a.currency = v.currency"
)


LOCKING = " ORDER BY a.name, a.currency FOR UPDATE OF a"


# Adds each delta: with the rows locked the result is what the memo says, and were it not, the
# balance would still be right (only a posting's running balance wrong, which the audit finds);
# the accounts_no_overdraft CHECK still refuses a user balance below zero.
_ADD = (
    "UPDATE accounts a SET balance = a.balance + v.delta "
    "FROM unnest(%b::numeric[], %b::text[], %b::text[]) AS v(delta, name, currency) "
    "WHERE a.name = v.name AND a.currency = v.currency"
)


# No ON CONFLICT: an account known missing under this transaction's lock that another writer
# created meanwhile fails here on its key (a Retry, which reads it again), never added to.
_CREATE = (
    "INSERT INTO accounts (name, currency, kind, balance) "
    "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::numeric[])"
)


# The event feed's seal (ledger.stores.events) in one statement: the counter's row updated
# (created by the first writer of a schema made without it), its new value giving the group's
# ids. Parameters: count, grp, count, committed_at.
SEAL = (
    "WITH taken AS (INSERT INTO event_counter (id, last_id) VALUES (1, %s) "
    "ON CONFLICT (id) DO UPDATE SET last_id = event_counter.last_id + excluded.last_id "
    "RETURNING last_id) "
    "INSERT INTO event_commits (grp, first_id, last_id, committed_at) "
    "SELECT %s, last_id - %s + 1, last_id, %s FROM taken"
)


# The arrays of the statements above: (name, currency) keys; (delta, name, currency) changes;
# (name, currency, kind, balance) accounts.
KEYS = (Texts, Texts)


DELTAS = (Numerics, Texts, Texts)


ACCOUNTS = (Texts, Texts, Texts, Numerics)


def _columns(
    rows: Sequence[tuple[Any, ...]], kinds: Sequence[type[Array]] | None = None
) -> tuple[list[Any], ...]:
    """The columns of ``rows``, each an array of its ``kinds`` (or a plain list, its element
    type then found by psycopg)."""
    columns = zip(*rows, strict=True)
    if kinds is None:
        return tuple(list(column) for column in columns)
    return tuple(kind(column) for kind, column in zip(kinds, columns, strict=True))


def _balances(
    connection: Connection, keys: Sequence[tuple[str, str]], locking: str
) -> dict[tuple[str, str], int]:
    """The balances of the ``(name, currency)`` accounts that exist (``locking``: the clause
    that locks them), looked up by key on the driver's connection."""
    found: dict[tuple[str, str], int] = {}
    for start in range(0, len(keys), BULK_ROWS):
        chunk = keys[start : start + BULK_ROWS]
        result = pipeline.run(connection, BALANCES + locking, _columns(chunk, KEYS), lookup=True)
        for name, currency, balance in result.fetchall():
            found[(name, currency)] = int(balance)
    return found


def _knows(memo: BalanceMemo | None, keys: Iterable[tuple[str, str]]) -> bool:
    return memo is not None and all(key in memo for key in keys)


def credit_locked(
    connection: Connection, rows: Sequence[tuple[str, str, str, int]], memo: BalanceMemo
) -> dict[tuple[str, str], int]:
    """upsert_balances of accounts whose balances this transaction holds locked (``memo``):
    the balances it leaves computed here, the writes queued."""
    after: dict[tuple[str, str], int] = {}
    added, created = [], []
    for name, currency, kind, delta in rows:
        before = memo[(name, currency)]
        balance = (before or 0) + delta
        if not -CAPACITY <= balance <= CAPACITY:
            # Before anything of post() is written, as on SQLite.
            raise CapacityExceeded(
                f"{name} {currency}: a balance beyond the {len(str(CAPACITY))} digits a store holds"
            )
        after[(name, currency)] = balance
        if before is None:
            created.append((name, currency, kind, delta))
        else:
            added.append((delta, name, currency))
    if added:
        defer(connection, _ADD, _columns(added, DELTAS), lookup=True)
    if created:
        defer(connection, _CREATE, _columns(created, ACCOUNTS))
    memo.update(after)
    return after


def debit_locked(
    connection: Connection, rows: Sequence[tuple[int, str, str]], memo: BalanceMemo
) -> int:
    """debit_balances of accounts whose balances this transaction holds locked (``memo``):
    all of them queued, or (one would go below zero, or does not exist) none, and how many
    could have been."""
    after: dict[tuple[str, str], int] = {}
    for delta, name, currency in rows:
        balance = memo[(name, currency)]
        if balance is not None and balance + delta >= 0:
            after[(name, currency)] = balance + delta
    if len(after) == len(rows):
        defer(connection, _ADD, _columns(rows, DELTAS), lookup=True)
        memo.update(after)
    return len(after)
