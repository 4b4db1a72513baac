"""Transactions and their postings written, with every account's balance kept beside them.

Invariant: a unit of work's postings are written with each account's running balance, counted up
leg by leg from the balance before it to the balance the updates leave; no user account is
debited below zero (the whole unit is refused with ``user.insufficient_funds``, nothing kept);
no leg or balance exceeds the digits a store holds (``CapacityExceeded``, before any write where
the database allows). The database checks again that each transaction's postings balance. Proved
by ``tests/stores/test_balance_memo.py``, ``tests/stores/test_capacity.py`` and the interface
contract suite.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection

from ..domain import Transaction, account_kind
from ..errors import CapacityExceeded, InsufficientFunds
from . import queries
from .dialect import BalanceMemo, Dialect
from .schema import CAPACITY, postings, transactions

__all__ = ["POSTING_COLUMNS", "TRANSACTION_COLUMNS", "post"]

POSTING_COLUMNS = ("txn_id", "account", "currency", "amount", "bet_uid", "balance_after")
TRANSACTION_COLUMNS = (
    "id",
    "idempotency_key",
    "kind",
    "user_uid",
    "reference",
    "created_at",
    "commit_grp",
)


def post(
    connection: Connection,
    dialect: Dialect,
    memo: BalanceMemo,
    new_transactions: Sequence[Transaction],
    now: Callable[[], datetime],
    grp: int,
) -> None:
    """Write ``new_transactions``, their postings and the balances they move; ``memo`` is the
    unit of work's (:data:`ledger.stores.dialect.BalanceMemo`), ``now`` its clock, ``grp`` its
    group (the commit the transactions name, :mod:`ledger.stores.chain`)."""
    deltas: dict[tuple[str, str], int] = defaultdict(int)
    ids = dialect.allocate_transaction_ids(connection, len(new_transactions))
    legs = []
    for txn_id, txn in zip(ids, new_transactions, strict=True):
        for leg in txn.postings:
            if not -CAPACITY <= leg.amount <= CAPACITY:
                # A request's summed house leg: refused before anything is written.
                raise CapacityExceeded(
                    f"{txn.kind.value}: a {leg.currency} leg on {leg.account} would "
                    f"exceed the {len(str(CAPACITY))} digits a store holds"
                )
            legs.append((txn_id, leg.account, leg.currency, leg.amount, leg.bet_uid))
            deltas[(leg.account, leg.currency)] += leg.amount
    credits: list[tuple[str, str, str, int]] = []
    debits: list[tuple[int, str, str]] = []
    unchanged: list[tuple[str, str]] = []
    for (name, currency), delta in sorted(deltas.items()):
        kind = account_kind(name)
        if delta < 0 and kind != "house":
            debits.append((delta, name, currency))
        elif delta:
            # House accounts may go below zero (prizes, cash): no check needed.
            credits.append((name, currency, kind, delta))
        else:
            unchanged.append((name, currency))
    # One upsert per account, creating the accounts seen for the first time; it cannot
    # fail for want of funds, so its place in the order does not matter. It is where a
    # balance past the store's capacity is refused (CapacityExceeded, 422): on SQLite
    # before any write, on Postgres by its CHECK, rolling the unit back.
    after = dialect.upsert_balances(connection, credits, memo)
    after.update(_balances_after_debits(connection, dialect, memo, debits, unchanged))
    # Taken once every account is locked: per account, time order is posting order,
    # which point-in-time balances rely on.
    stamp = dialect.timestamp(now())
    headers = [
        (txn_id, txn.key, txn.kind._value_, txn.user, txn.reference, stamp, grp)
        for txn_id, txn in zip(ids, new_transactions, strict=True)
    ]
    # Postings first, then the transaction rows that seal them: the database checks,
    # when a transaction row arrives (SQLite) or at commit (Postgres), that its postings
    # sum to zero per currency.
    dialect.insert_rows(
        connection, postings, POSTING_COLUMNS, _with_running_balances(legs, deltas, after)
    )
    dialect.insert_rows(connection, transactions, TRANSACTION_COLUMNS, headers)
    # Debits last, after the idempotency keys are claimed. On Postgres a concurrent
    # writer of the same key (a re-sent withdrawal) then waits (on the account's lock,
    # or the unique index) and fails with a unique violation, which is a Retry that sees
    # the winner's work and answers "unchanged"; debited first, it would fail on the
    # balance the winner had just spent as user.insufficient_funds (a 402) instead.
    _debit(connection, dialect, memo, debits)


def _balances_after_debits(
    connection: Connection,
    dialect: Dialect,
    memo: BalanceMemo,
    debits: list[tuple[int, str, str]],
    unchanged: list[tuple[str, str]],
) -> dict[tuple[str, str], int]:
    """What the debited accounts (and those whose legs cancel out) will hold after this
    unit of work, read under a lock that keeps every other writer out until commit."""
    keys = sorted([(name, currency) for _, name, currency in debits] + unchanged)
    if not keys:
        return {}
    current = dialect.lock_balances(connection, keys, memo)
    after = {key: current.get(key, 0) for key in unchanged}
    for delta, name, currency in debits:
        # Possibly below zero: then _debit refuses the unit of work, with nothing kept.
        after[(name, currency)] = current.get((name, currency), 0) + delta
    return after


def _debit(
    connection: Connection,
    dialect: Dialect,
    memo: BalanceMemo,
    debits: list[tuple[int, str, str]],
) -> None:
    """Apply debits of user balances, refusing any that would go below zero.

    Held money only ever returns what a hold put there, so only available balances can
    really come up short; held ones are checked all the same.
    """
    # Atomic against every other writer, and an overdraft changes no row: conditional
    # updates on Postgres, a read-modify-write under SQLite's one-writer lock.
    if dialect.debit_balances(connection, debits, memo) == len(debits):
        return
    # Only to name the user in the error (the unit of work is rolled back anyway).
    found = queries.account_balances(connection, [(name, cur) for _, name, cur in debits])
    user, currency = next(
        ((name, cur) for delta, name, cur in debits if found.get((name, cur), 0) + delta < 0),
        (debits[0][1], debits[0][2]),
    )
    raise InsufficientFunds(f"user {user.removeprefix('user:')} has insufficient {currency} funds")


def _with_running_balances(
    legs: list[tuple[int, str, str, int, int | None]],
    deltas: Mapping[tuple[str, str], int],
    after: Mapping[tuple[str, str], int],
) -> list[tuple[int, str, str, int, int | None, int]]:
    """Each leg with its account's balance after it: the legs are written (and get their ids)
    in this order, so each account's running values count up, leg by leg, from its balance
    before this unit of work to the balance the updates leave."""
    running = {key: after[key] - delta for key, delta in deltas.items()}
    rows = []
    for txn_id, account, currency, amount, bet_uid in legs:
        key = (account, currency)
        balance = running[key] = running[key] + amount
        rows.append((txn_id, account, currency, amount, bet_uid, balance))
    return rows
