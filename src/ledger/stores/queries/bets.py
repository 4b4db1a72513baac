"""Bets and transactions as a decision reads them, and every bet streamed for reconciliation."""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    Connection,
    column,
    select,
    table,
    tuple_,
)

from ...domain import (
    Bet,
    BetState,
    Funding,
    Posting,
    Transaction,
    TxnKind,
)
from ..dialect import BalanceMemo, Dialect
from ..schema import accounts, from_stored, postings, transactions

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


def bet_from_row(row: Any) -> Bet:
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
    return {row[0]: bet_from_row(row) for row in rows}


def bets_and_balances(
    connection: Connection,
    dialect: Dialect,
    uids: Sequence[int],
    keys: Collection[tuple[str, str]],
    memo: BalanceMemo,
    users: Sequence[str] = (),
    probe: dict[str, list[str]] | None = None,
) -> tuple[dict[int, Bet], dict[tuple[str, str], int]]:
    """The recorded bets among ``uids`` and the balances of the ``keys`` accounts that exist,
    held for this transaction's writes (:meth:`.Dialect.bets_and_balances`, with its limits'
    probe of ``users``)."""
    rows, balances = dialect.bets_and_balances(
        connection, sorted(set(uids)), sorted(keys), memo, users, probe
    )
    return {row[0]: bet_from_row(row) for row in rows}, balances


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
