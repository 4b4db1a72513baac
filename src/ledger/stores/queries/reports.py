"""The house's totals over a period, the hourly activity, a tournament's totals."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Select,
    and_,
    case,
    func,
    or_,
    select,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from ...domain import (
    HOUSE_CASH,
    HOUSE_ENTRIES,
    HOUSE_PREFIX,
    HOUSE_PRIZES,
    HOUSE_RAKE,
    HOUSE_TICKETS,
    BetState,
    Funding,
    TxnKind,
)
from ..base import (
    HourTotals,
    HouseTotals,
    PoolTotals,
)
from ..dialect import Dialect
from ..schema import accounts, bets, postings, transactions

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
