"""Reads: the state the write path decides on (bets, transactions, balances) and the reports.

Plain functions over an open connection; the unit of work (:mod:`.sql`) calls them inside its
transaction and translates driver errors. Amounts come back as Python integers of the minor unit
whatever the column holds them as (see :class:`ledger.stores.schema.Amount`).
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    FromClause,
    Select,
    and_,
    case,
    column,
    func,
    or_,
    select,
    table,
    tuple_,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from ..domain import (
    HOUSE_CASH,
    HOUSE_ENTRIES,
    HOUSE_PREFIX,
    HOUSE_PRIZES,
    HOUSE_RAKE,
    HOUSE_TICKETS,
    Bet,
    BetState,
    Funding,
    Posting,
    Transaction,
    TxnKind,
)
from .base import (
    AccountBalance,
    HoldRow,
    HourTotals,
    HouseTotals,
    PoolTotals,
    StaleRule,
    StatementRow,
)
from .dialect import BalanceMemo, Dialect
from .schema import accounts, bets, from_stored, open_bets, postings, tournaments, transactions

__all__ = [
    "BET_SELECT",
    "RECORD_BATCH",
    "account_balances",
    "balances",
    "balances_at",
    "bet_records",
    "count_stale_holds",
    "get_bets",
    "get_transaction",
    "holds",
    "hourly_totals",
    "house_totals",
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


def bets_and_balances(
    connection: Connection,
    dialect: Dialect,
    uids: Sequence[int],
    keys: Collection[tuple[str, str]],
    memo: BalanceMemo,
) -> tuple[dict[int, Bet], dict[tuple[str, str], int]]:
    """The recorded bets among ``uids`` and the balances of the ``keys`` accounts that exist,
    held for this transaction's writes (:meth:`.Dialect.bets_and_balances`)."""
    rows, balances = dialect.bets_and_balances(connection, sorted(set(uids)), sorted(keys), memo)
    return {row[0]: _bet_from_row(row) for row in rows}, balances


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
    return _per_currency(connection.execute(query), held)


def _per_currency(rows: Iterable[Any], held: str) -> list[AccountBalance]:
    """``(account, currency, balance)`` rows of one user's two accounts as one balance per
    currency, sorted by currency (two rows per currency at most: combined here, not in SQL)."""
    found: dict[str, dict[str, int]] = defaultdict(dict)
    for name, currency, balance in rows:
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
    """The postings on the user's accounts, newest first, older than posting id ``before``,
    each with the account's balance after it and its bet's tournament."""
    available, held = f"user:{user}", f"user:{user}:held"
    query = (
        select(
            postings.c.id,
            postings.c.account,
            postings.c.currency,
            postings.c.amount,
            postings.c.balance_after,
            transactions.c.id.label("txn_id"),
            transactions.c.kind,
            postings.c.bet_uid,
            bets.c.pool_uid,
            transactions.c.reference,
            transactions.c.created_at,
        )
        .select_from(
            postings.join(transactions, transactions.c.id == postings.c.txn_id).outerjoin(
                bets, bets.c.uid == postings.c.bet_uid
            )
        )
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
            balance_after=row.balance_after,
            pool_uid=row.pool_uid,
        )
        for row in connection.execute(query)
    ]


def balances_at(connection: Connection, user: str, at: datetime) -> list[AccountBalance]:
    """The user's balances at ``at``: per account, the running balance its last posting at or
    before that moment left. Posting order is time order per account (the store stamps a
    transaction once its accounts are locked), so the last posting is the highest id."""
    available, held = f"user:{user}", f"user:{user}:held"
    last = (
        select(func.max(postings.c.id))
        .select_from(postings.join(transactions, transactions.c.id == postings.c.txn_id))
        .where(
            postings.c.account.in_([available, held]),
            transactions.c.created_at <= at.astimezone(UTC),
        )
        .group_by(postings.c.account, postings.c.currency)
    )
    query = select(postings.c.account, postings.c.currency, postings.c.balance_after).where(
        postings.c.id.in_(last.scalar_subquery())
    )
    return _per_currency(connection.execute(query), held)


# --- open holds -----------------------------------------------------------------------------------


def stale_condition(rule: StaleRule) -> ColumnElement[bool]:
    """When an open hold is stale: the one home of the rule.

    A hold whose tournament has an ``estimated_end_time`` is stale once that time plus
    ``rule.grace`` has passed, whatever its age; without an end time, once it was placed more
    than ``rule.max_age`` ago. Read from :func:`holds_source`, which joins the tournaments.
    """
    return case(
        (
            tournaments.c.estimated_end_time.is_not(None),
            tournaments.c.estimated_end_time <= (rule.now - rule.grace).astimezone(UTC),
        ),
        else_=open_bets.c.placed_at <= (rule.now - rule.max_age).astimezone(UTC),
    )


def holds_source() -> FromClause:
    """What open holds are read from: ``open_bets`` (which bets are open, oldest first) with
    their bets and their tournament's estimated end."""
    return open_bets.join(bets, bets.c.uid == open_bets.c.uid).outerjoin(
        tournaments, tournaments.c.uid == bets.c.pool_uid
    )


def holds(
    connection: Connection,
    *,
    limit: int,
    after: tuple[datetime, int] | None,
    user: str | None,
    pool_uid: int | None,
    placed_by: datetime | None,
    rule: StaleRule,
    only_stale: bool,
) -> list[HoldRow]:
    """Open holds (placed bets), oldest first, after the ``(placed_at, uid)`` position."""
    query = (
        select(
            bets.c.uid,
            bets.c.user_uid,
            bets.c.pool_uid,
            bets.c.currency,
            bets.c.amount,
            bets.c.rake,
            bets.c.funding,
            open_bets.c.placed_at,
            # Computed where it is filtered: the rule has one home.
            stale_condition(rule).label("stale"),
        )
        .select_from(holds_source())
        .order_by(open_bets.c.placed_at, open_bets.c.uid)
        .limit(limit)
    )
    if after is not None:
        placed_at, uid = after[0].astimezone(UTC), after[1]
        query = query.where(
            or_(
                open_bets.c.placed_at > placed_at,
                and_(open_bets.c.placed_at == placed_at, open_bets.c.uid > uid),
            )
        )
    if user is not None:
        query = query.where(bets.c.user_uid == user)
    if pool_uid is not None:
        query = query.where(bets.c.pool_uid == pool_uid)
    if placed_by is not None:
        query = query.where(open_bets.c.placed_at <= placed_by.astimezone(UTC))
    if only_stale:
        query = query.where(stale_condition(rule))
    return [
        HoldRow(
            uid=row.uid,
            user=row.user_uid,
            pool_uid=row.pool_uid,
            currency=row.currency,
            amount=row.amount,
            rake=row.rake,
            funding=row.funding,
            placed_at=row.placed_at,
            stale=bool(row.stale),
        )
        for row in connection.execute(query)
    ]


def count_stale_holds(connection: Connection, stale: StaleRule) -> int:
    """How many open holds are stale: a walk of ``open_bets``, the open holds only."""
    query = select(func.count()).select_from(holds_source()).where(stale_condition(stale))
    return int(connection.execute(query).scalar_one())


# --- the house ------------------------------------------------------------------------------------

# Which (transaction kind, account) legs make each period total, and the sign that makes it
# positive: a deposit takes money from house:cash, a withdrawal gives it back, a capture puts
# stakes on house:entries and rake on house:rake, prizes leave house:prizes, a ticket-funded hold
# takes from house:tickets, and a refund releases held money (to the user or to house:tickets).
_HELD = "held"
HOUSE_TOTALS = {
    (TxnKind.DEPOSIT.value, HOUSE_CASH): ("deposits", -1),
    (TxnKind.WITHDRAWAL.value, HOUSE_CASH): ("withdrawals", 1),
    (TxnKind.SETTLE.value, HOUSE_ENTRIES): ("stakes_captured", 1),
    (TxnKind.SETTLE.value, HOUSE_RAKE): ("rake_earned", 1),
    (TxnKind.SETTLE.value, HOUSE_PRIZES): ("prizes_paid", -1),
    (TxnKind.HOLD.value, HOUSE_TICKETS): ("ticket_funded", -1),
    (TxnKind.REFUND.value, _HELD): ("refunds", -1),
}


def house_totals(
    connection: Connection,
    dialect: Dialect,
    since: datetime | None,
    until: datetime | None,
    currency: str | None,
) -> list[HouseTotals]:
    """Per currency: the house accounts' balances now, and the totals of ``[since, until)``
    summed exactly from the postings (entries and players counted from the bets)."""
    balances: dict[str, dict[str, int]] = defaultdict(dict)
    query = select(accounts.c.name, accounts.c.currency, accounts.c.balance).where(
        accounts.c.kind == "house"
    )
    if currency is not None:
        query = query.where(accounts.c.currency == currency)
    for name, found_currency, balance in connection.execute(query):
        balances[found_currency][name] = balance

    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    group = case((postings.c.account.like(f"{HOUSE_PREFIX}%"), postings.c.account), else_=_HELD)
    legs: Select[Any] = (
        select(
            transactions.c.kind, group, postings.c.currency, dialect.exact_sum(postings.c.amount)
        )
        .select_from(postings.join(transactions, transactions.c.id == postings.c.txn_id))
        .where(
            or_(
                postings.c.account.like(f"{HOUSE_PREFIX}%"),
                and_(
                    transactions.c.kind == TxnKind.REFUND.value,
                    postings.c.account.like("user:%:held"),
                ),
            )
        )
        .group_by(transactions.c.kind, group, postings.c.currency)
    )
    legs = _period(legs, transactions.c.created_at, since, until)
    if currency is not None:
        legs = legs.where(postings.c.currency == currency)
    for kind, account, found_currency, amount in connection.execute(legs):
        wanted = HOUSE_TOTALS.get((kind, account))
        if wanted is not None:
            name, sign = wanted
            totals[found_currency][name] += sign * int(amount or 0)

    entries: Select[Any] = select(
        bets.c.currency,
        func.count(),
        func.count(bets.c.user_uid.distinct()),
        func.count(case((bets.c.funding == Funding.TICKET.value, 1))),
    ).group_by(bets.c.currency)
    entries = _period(entries, bets.c.placed_at, since, until)
    if currency is not None:
        entries = entries.where(bets.c.currency == currency)
    for found_currency, count, players, tickets in connection.execute(entries):
        found = totals[found_currency]
        found["entries"], found["unique_players"], found["ticket_entries"] = (
            int(count),
            int(players),
            int(tickets),
        )
    return [
        HouseTotals(
            currency=found_currency,
            balances=dict(sorted(balances[found_currency].items())),
            **totals[found_currency],
        )
        for found_currency in sorted(set(balances) | set(totals))
    ]


def _period(
    query: Select[Any], column: ColumnElement[Any], since: datetime | None, until: datetime | None
) -> Select[Any]:
    """``query`` within ``[since, until)``."""
    if since is not None:
        query = query.where(column >= since.astimezone(UTC))
    if until is not None:
        query = query.where(column < until.astimezone(UTC))
    return query


class _EpochHour(FunctionElement[int]):
    """The whole hours from 1970-01-01 UTC to a (UTC) timestamp: an hour's bucket, exact on
    both databases (never through floating point)."""

    type = BigInteger()
    inherit_cache = True
    name = "epoch_hour"


@compiles(_EpochHour, "sqlite")
def _epoch_hour_sqlite(element: _EpochHour, compiler: SQLCompiler, **kw: Any) -> str:
    # strftime('%s') drops the fraction of a second: integer division floors to the hour.
    return f"(CAST(strftime('%s', {compiler.process(element.clauses, **kw)}) AS INTEGER) / 3600)"


@compiles(_EpochHour, "postgresql")
def _epoch_hour_postgres(element: _EpochHour, compiler: SQLCompiler, **kw: Any) -> str:
    # EXTRACT gives an exact numeric (Postgres 14 and later); floor keeps the hour it is in.
    moment = compiler.process(element.clauses, **kw)
    return f"CAST(floor(EXTRACT(EPOCH FROM {moment}) / 3600) AS BIGINT)"


def hourly_totals(
    connection: Connection, dialect: Dialect, since: datetime, until: datetime
) -> list[HourTotals]:
    """Per hour of ``[since, until)`` and currency: entries placed and their stakes (by the
    bets' ``placed_at``), and payouts paid in that currency (by the settled bets'
    ``closed_at``). Two grouped reads; sorted by hour, then currency."""
    found: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    placed_hour = _EpochHour(bets.c.placed_at)
    placed: Select[Any] = select(
        placed_hour, bets.c.currency, func.count(), dialect.exact_sum(bets.c.amount)
    ).group_by(placed_hour, bets.c.currency)
    for hour, currency, count, stakes in connection.execute(
        _period(placed, bets.c.placed_at, since, until)
    ):
        found[(int(hour), currency)][0:2] = [int(count), int(stakes or 0)]
    closed_hour = _EpochHour(bets.c.closed_at)
    paid: Select[Any] = (
        select(closed_hour, bets.c.payout_currency, dialect.exact_sum(bets.c.payout))
        .where(bets.c.state == BetState.SETTLED.value, bets.c.payout_currency.is_not(None))
        .group_by(closed_hour, bets.c.payout_currency)
    )
    for hour, currency, payouts in connection.execute(
        _period(paid, bets.c.closed_at, since, until)
    ):
        found[(int(hour), currency)][2] = int(payouts or 0)
    return [
        HourTotals(datetime.fromtimestamp(hour * 3600, UTC), currency, *totals)
        for (hour, currency), totals in sorted(found.items())
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
