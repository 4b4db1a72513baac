"""A user's balances, now or at a moment, and their statement."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Connection,
    func,
    select,
)

from ..base import (
    AccountBalance,
    StatementRow,
)
from ..schema import accounts, bets, postings, transactions


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
