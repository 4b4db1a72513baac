"""Reads: the state the write path decides on (bets, transactions, balances) and the reports.

Plain functions over an open connection; the unit of work (:mod:`.sql`) calls them inside its
transaction and translates driver errors. Amounts come back as Python integers of the minor unit
whatever the column holds them as (see :class:`ledger.stores.schema.Amount`).
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from sqlalchemy import Connection, column, func, select, table, tuple_

from ..domain import Bet, BetState, Funding, Posting, Transaction, TxnKind
from .base import AccountBalance, PoolTotals, StatementRow
from .dialect import Dialect
from .schema import accounts, bets, from_stored, postings, transactions

__all__ = [
    "BET_SELECT",
    "RECORD_BATCH",
    "account_balances",
    "balances",
    "bet_records",
    "get_bets",
    "get_transaction",
    "pool_totals",
    "statement",
]

# The bet columns in the order of the Bet record's fields: select_bets returns plain tuples.
BET_SELECT = (
    "uid, user_uid, pool_uid, currency, amount, rake, funding, state, payout, payout_currency, "
    "ticket, request_uuid, secrets"
)

_STATES = {state.value: state for state in BetState}
_FUNDINGS = {funding.value: funding for funding in Funding}


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _secrets(value: Any) -> Mapping[str, Any]:
    # SQLite hands JSON back as text, Postgres as parsed objects.
    if isinstance(value, str):
        return _parse_secrets(value)
    return MappingProxyType(dict(value or {}))


@functools.lru_cache(maxsize=1024)
def _parse_secrets(text: str) -> Mapping[str, Any]:
    # Every bet of one Place Bet request stores the same secrets: parse each text once.
    # Read-only, because the cached mapping is shared.
    return MappingProxyType(json.loads(text))


def _bet_from_row(row: Any) -> Bet:
    # Hot: a settle reads every participant's bet. Plain tuples in, a NamedTuple out.
    (uid, user, pool, currency, amount, rake, funding, state, payout, payout_currency, *rest) = row
    ticket, request_uuid, secrets = rest
    return Bet(
        uid,
        user,
        pool,
        currency,
        # Raw driver values: SQLite's text beyond 64 bits, Postgres' Decimal.
        amount if amount.__class__ is int else int(amount),
        rake if rake.__class__ is int else int(rake),
        _FUNDINGS[funding],
        _STATES[state],
        payout if payout is None or payout.__class__ is int else int(payout),
        payout_currency,
        ticket,
        request_uuid,
        _secrets(secrets),
    )


def get_bets(connection: Connection, dialect: Dialect, uids: Sequence[int]) -> dict[int, Bet]:
    """The recorded bets among ``uids``."""
    rows = dialect.select_bets(connection, sorted(set(uids)))
    return {row[0]: _bet_from_row(row) for row in rows}


def get_transaction(connection: Connection, key: str) -> Transaction | None:
    """The transaction with this idempotency key, with its postings."""
    header = connection.execute(
        select(transactions).where(transactions.c.idempotency_key == key)
    ).first()
    if header is None:
        return None
    legs = connection.execute(
        select(postings.c.account, postings.c.currency, postings.c.amount, postings.c.bet_uid)
        .where(postings.c.txn_id == header.id)
        .order_by(postings.c.id)
    )
    return Transaction(
        key=header.idempotency_key,
        kind=TxnKind(header.kind),
        postings=tuple(Posting(leg.account, leg.currency, leg.amount, leg.bet_uid) for leg in legs),
        user=header.user_uid,
        reference=header.reference,
    )


def account_balances(
    connection: Connection, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """The balances of the ``(name, currency)`` accounts that exist."""
    found: dict[tuple[str, str], int] = {}
    for chunk in _chunks(sorted(set(keys)), 400):
        query = select(accounts.c.name, accounts.c.currency, accounts.c.balance).where(
            tuple_(accounts.c.name, accounts.c.currency).in_(list(chunk))
        )
        for name, currency, balance in connection.execute(query):
            found[(name, currency)] = balance
    return found


def balances(connection: Connection, user: str) -> list[AccountBalance]:
    """The user's balances, one per currency, sorted by currency."""
    available, held = f"user:{user}", f"user:{user}:held"
    query = select(accounts.c.name, accounts.c.currency, accounts.c.balance).where(
        accounts.c.name.in_([available, held])
    )
    # Two rows per currency at most: combined here rather than summed in SQL.
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for name, currency, balance in connection.execute(query):
        found[currency]["held" if name == held else "available"] = balance
    return [
        AccountBalance(
            currency=currency,
            available=found[currency].get("available", 0),
            held=found[currency].get("held", 0),
        )
        for currency in sorted(found)
    ]


def statement(
    connection: Connection, user: str, currency: str | None, limit: int, before: int | None
) -> list[StatementRow]:
    """The postings on the user's accounts, newest first, older than posting id ``before``."""
    available, held = f"user:{user}", f"user:{user}:held"
    query = (
        select(
            postings.c.id,
            postings.c.account,
            postings.c.currency,
            postings.c.amount,
            transactions.c.id.label("txn_id"),
            transactions.c.kind,
            postings.c.bet_uid,
            transactions.c.reference,
            transactions.c.created_at,
        )
        .join(transactions, transactions.c.id == postings.c.txn_id)
        .where(postings.c.account.in_([available, held]))
        .order_by(postings.c.id.desc())
        .limit(limit)
    )
    if currency is not None:
        query = query.where(postings.c.currency == currency)
    if before is not None:
        query = query.where(postings.c.id < before)
    return [
        StatementRow(
            id=row.id,
            created_at=row.created_at,
            account="held" if row.account == held else "available",
            currency=row.currency,
            amount=row.amount,
            kind=row.kind,
            bet_uid=row.bet_uid,
            reference=row.reference,
            transaction_id=row.txn_id,
        )
        for row in connection.execute(query)
    ]


def pool_totals(connection: Connection, dialect: Dialect, pool_uid: int) -> list[PoolTotals]:
    """The tournament's entries grouped by currency and state, payouts by payout currency."""
    query = (
        select(
            bets.c.currency,
            bets.c.state,
            bets.c.payout_currency,
            func.count(),
            dialect.exact_sum(bets.c.amount),
            dialect.exact_sum(bets.c.rake),
            dialect.exact_sum(bets.c.payout),
        )
        .where(bets.c.pool_uid == pool_uid)
        .group_by(bets.c.currency, bets.c.state, bets.c.payout_currency)
    )
    groups: dict[tuple[str, str], list[int]] = {}
    payouts: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for currency, state, payout_currency, entries, stakes, rake, paid in connection.execute(query):
        totals = groups.setdefault((currency, state), [0, 0, 0])
        totals[0] += int(entries)
        totals[1] += int(stakes)
        totals[2] += int(rake)
        if payout_currency is not None and paid:
            payouts[(currency, state)][payout_currency] = int(paid)
    return [
        PoolTotals(
            currency=currency,
            state=state,
            entries=entries,
            stakes=stakes,
            rake=rake,
            payouts=dict(sorted(payouts[(currency, state)].items())),
        )
        for (currency, state), (entries, stakes, rake) in sorted(groups.items())
    ]


# Rows per batch of :func:`bet_records`: the driver fetches this many at a time (a server-side
# cursor on Postgres), so a reconciliation of millions of bets holds one batch in memory.
RECORD_BATCH = 10_000


# The bets' columns without their SQLAlchemy types: a reconciliation reads millions of rows,
# and converting each amount through the Amount type costs more than reading it.
_RECORDED = "uid user_uid pool_uid currency amount rake state payout payout_currency"
_RAW_BETS = table("bets", *map(column, _RECORDED.split()))


def bet_records(
    connection: Connection,
    pools: Collection[int] | None = None,
    uids: Collection[int] | None = None,
) -> Iterator[list[tuple[Any, ...]]]:
    """Every bet, or the bets of ``pools`` and the bets ``uids`` names, in batches of tuples
    ``(uid, user_uid, pool_uid, currency, amount, rake, state, payout, payout_currency)``,
    amounts as integers of the minor unit. A bet both in a pool and named may come twice."""
    raw = _RAW_BETS.c
    if pools is None and uids is None:
        selections = [select(*raw)]
    else:
        # Chunked IN lists: a file may name a hundred thousand pools, beyond a driver's limit
        # of bound parameters.
        selections = [
            select(*raw).where(raw.pool_uid.in_(list(chunk)))
            for chunk in _chunks(sorted(pools or ()), 1000)
        ] + [
            select(*raw).where(raw.uid.in_(list(chunk)))
            for chunk in _chunks(sorted(uids or ()), 1000)
        ]
    for selection in selections:
        result = connection.execute(selection, execution_options={"yield_per": RECORD_BATCH})
        for partition in result.partitions():
            yield [
                (
                    uid,
                    user,
                    pool,
                    currency,
                    from_stored(amount),
                    from_stored(rake),
                    state,
                    None if payout is None else from_stored(payout),
                    payout_currency,
                )
                for uid, user, pool, currency, amount, rake, state, payout, payout_currency in (
                    partition
                )
            ]
