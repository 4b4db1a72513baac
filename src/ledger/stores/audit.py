"""The audit: re-prove the journal's invariants (DESIGN section 4) from the stored rows.

``ledger check`` runs :func:`check` in one read transaction. It trusts nothing the write path
keeps for speed: balances are recomputed from the postings, and every bet's money is traced
through the legs tagged with its uid. At most 50 problems of each kind are listed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, String, and_, case, cast, func, literal, not_, or_, select
from sqlalchemy.sql import ColumnElement

from ..domain import BetState, Funding, TxnKind
from .base import CheckReport
from .dialect import Dialect
from .schema import accounts, bets, open_bets, postings, transactions

__all__ = ["check", "ping"]

LIMIT = 50

# Each posting with its account, if the account exists.
_POSTINGS_AND_ACCOUNTS = postings.outerjoin(
    accounts,
    and_(accounts.c.name == postings.c.account, accounts.c.currency == postings.c.currency),
)


def _negative(amount: ColumnElement[Any]) -> ColumnElement[bool]:
    # The sign is the first character of the decimal form: exact on every store, including
    # SQLite's text form of wide values, which SQLite would compare as greater than any number.
    return func.substr(cast(amount, String), 1, 1) == "-"


def _positive(amount: ColumnElement[Any]) -> ColumnElement[bool]:
    return and_(not_(_negative(amount)), amount != 0)


def ping(connection: Connection) -> None:
    """One round trip: the database answers."""
    connection.execute(select(literal(1))).scalar_one()


def check(connection: Connection, dialect: Dialect) -> CheckReport:
    """Verify invariants 1 to 4 over the whole journal."""
    problems: list[str] = []
    problems.extend(_balanced_transactions(connection, dialect))
    problems.extend(_balances_equal_postings(connection, dialect))
    problems.extend(_running_balances(connection))
    problems.extend(_no_negative_user_balance(connection))
    problems.extend(_keys_used_once(connection))
    problems.extend(_bets_match_their_money(connection, dialect))
    problems.extend(_held_equals_open_holds(connection, dialect))
    problems.extend(_open_bets_are_the_placed_bets(connection))
    counts = [
        connection.execute(select(func.count()).select_from(table)).scalar_one()
        for table in (transactions, postings, accounts, bets)
    ]
    return CheckReport(
        problems=problems,
        transactions=counts[0],
        postings=counts[1],
        accounts=counts[2],
        bets=counts[3],
    )


def _balanced_transactions(connection: Connection, dialect: Dialect) -> Iterator[str]:
    """1. Every transaction sums to zero per currency; every posting has a transaction."""
    total = dialect.exact_sum(postings.c.amount)
    for row in connection.execute(
        select(postings.c.txn_id, postings.c.currency, total)
        .group_by(postings.c.txn_id, postings.c.currency)
        .having(total != 0)
        .limit(LIMIT)
    ):
        yield f"transaction {row[0]} is off by {row[2]} in {row[1]}"
    orphans = connection.execute(
        select(func.count())
        .select_from(postings.outerjoin(transactions))
        .where(transactions.c.id.is_(None))
    ).scalar_one()
    if orphans:
        yield f"{orphans} postings have no transaction"
    # Every posting is on an account that exists (the balance upsert creates them).
    for account, currency in connection.execute(
        select(postings.c.account, postings.c.currency)
        .select_from(_POSTINGS_AND_ACCOUNTS)
        .where(accounts.c.name.is_(None))
        .distinct()
        .limit(LIMIT)
    ):
        yield f"postings on account {account} {currency}, which does not exist"


def _balances_equal_postings(connection: Connection, dialect: Dialect) -> Iterator[str]:
    """2. Each account's balance equals the sum of its postings."""
    sums = (
        select(
            postings.c.account,
            postings.c.currency,
            dialect.exact_sum(postings.c.amount).label("total"),
        )
        .group_by(postings.c.account, postings.c.currency)
        .subquery()
    )
    for row in connection.execute(
        select(accounts.c.name, accounts.c.currency, accounts.c.balance, sums.c.total)
        .select_from(
            accounts.outerjoin(
                sums,
                and_(sums.c.account == accounts.c.name, sums.c.currency == accounts.c.currency),
            )
        )
        .where(accounts.c.balance != func.coalesce(sums.c.total, 0))
        .limit(LIMIT)
    ):
        yield (f"account {row[0]} {row[1]} has balance {row[2]} but postings sum to {row[3] or 0}")


def _running_balances(connection: Connection) -> Iterator[str]:
    """Each posting's ``balance_after`` is the previous one's plus its amount, in posting order
    per account, starting from zero; the last equals the account's balance.

    One pass over the postings in the order of the ``postings_account`` index, streamed (a
    server-side cursor on Postgres), added in Python: exact at any size, in constant memory
    whatever the volume.
    """
    rows = connection.execute(
        select(
            postings.c.account,
            postings.c.currency,
            postings.c.id,
            postings.c.amount,
            postings.c.balance_after,
            accounts.c.balance,
        )
        .select_from(_POSTINGS_AND_ACCOUNTS)
        .order_by(postings.c.account, postings.c.currency, postings.c.id)
        .execution_options(stream_results=True, yield_per=10_000)
    )
    found = 0
    key: tuple[str, str] | None = None
    running = 0
    last: int | None = None
    balance: int | None = None

    def closing() -> str | None:
        # The running sum goes on from the true sums: one bad value is reported once.
        if key is not None and balance is not None and last != balance:
            return (
                f"account {key[0]} {key[1]} has balance {balance} but its last posting says {last}"
            )
        return None

    for account, currency, posting_id, amount, after, account_balance in rows:
        if (account, currency) != key:
            problem = closing()
            if problem is not None:
                found += 1
                if found <= LIMIT:
                    yield problem
            key, running, last, balance = (account, currency), 0, None, account_balance
        running += amount
        if after != running:
            found += 1
            if found <= LIMIT:
                yield (
                    f"posting {posting_id} on {account} {currency} says the balance after it "
                    f"is {after}, but the postings up to it sum to {running}"
                )
        last = after
    problem = closing()
    if problem is not None and found < LIMIT:
        yield problem


def _no_negative_user_balance(connection: Connection) -> Iterator[str]:
    """3. No user balance is negative."""
    for row in connection.execute(
        select(accounts.c.name, accounts.c.currency, accounts.c.balance)
        .where(accounts.c.kind != "house", _negative(accounts.c.balance))
        .limit(LIMIT)
    ):
        yield f"account {row[0]} {row[1]} is negative: {row[2]}"


def _keys_used_once(connection: Connection) -> Iterator[str]:
    """4. Each idempotency key is used once (the unique index makes this structural)."""
    for row in connection.execute(
        select(transactions.c.idempotency_key, func.count())
        .group_by(transactions.c.idempotency_key)
        .having(func.count() > 1)
        .limit(LIMIT)
    ):
        yield f"idempotency key {row[0]} is used {row[1]} times"


def _bets_match_their_money(connection: Connection, dialect: Dialect) -> Iterator[str]:
    """4. Each bet is held at most once and closed at most once, and its state matches its money.

    The bet's primary key and its placed-only state trigger make this structural; this proves it
    from the legs tagged with the bet's uid.
    """
    held_name = literal("user:") + bets.c.user_uid + literal(":held")
    user_name = literal("user:") + bets.c.user_uid

    def total(condition: Any) -> Any:
        return func.coalesce(dialect.exact_sum(case((condition, postings.c.amount), else_=None)), 0)

    legs = (
        select(
            postings.c.bet_uid,
            total(and_(postings.c.account == held_name, _positive(postings.c.amount))).label(
                "held"
            ),
            total(and_(postings.c.account == held_name, _negative(postings.c.amount))).label(
                "released"
            ),
            total(
                and_(postings.c.account == user_name, transactions.c.kind == TxnKind.HOLD.value)
            ).label("debited"),
            total(
                and_(postings.c.account == user_name, transactions.c.kind == TxnKind.REFUND.value)
            ).label("refunded"),
            total(
                and_(postings.c.account == user_name, transactions.c.kind == TxnKind.SETTLE.value)
            ).label("paid"),
        )
        .select_from(
            postings.join(transactions, transactions.c.id == postings.c.txn_id).join(
                bets, bets.c.uid == postings.c.bet_uid
            )
        )
        .where(postings.c.bet_uid.is_not(None))
        .group_by(postings.c.bet_uid)
        .subquery()
    )
    query = select(
        bets.c.uid,
        bets.c.state,
        bets.c.funding,
        bets.c.amount,
        bets.c.rake,
        bets.c.payout,
        legs.c.held,
        legs.c.released,
        legs.c.debited,
        legs.c.refunded,
        legs.c.paid,
    ).select_from(bets.outerjoin(legs, legs.c.bet_uid == bets.c.uid))
    found = 0
    for row in connection.execute(query):
        uid, state, funding, amount, rake, payout = row[:6]
        held, released, debited, refunded, paid = (int(value or 0) for value in row[6:])
        cost = amount + rake
        placed = state == BetState.PLACED.value
        charged = 0 if funding == Funding.FREE.value else cost
        expected = {
            "held": charged,
            "released": 0 if placed else charged,
            "debited": cost if funding == Funding.CASH.value else 0,
            "refunded": cost if funding == Funding.CASH.value and state == "refunded" else 0,
            "paid": (payout or 0) if state == BetState.SETTLED.value else 0,
        }
        actual = {
            "held": held,
            "released": -released,
            "debited": -debited,
            "refunded": refunded,
            "paid": paid,
        }
        if actual != expected:
            found += 1
            if found <= LIMIT:
                yield f"bet {uid} is {state} ({funding}): legs {actual}, expected {expected}"


def _open_bets_are_the_placed_bets(connection: Connection) -> Iterator[str]:
    """``open_bets`` (what the open holds are read from) lists every placed bet, with the time
    it was placed, and nothing else."""
    placed = bets.c.state == BetState.PLACED.value
    missing = (
        select(bets.c.uid)
        .select_from(bets.outerjoin(open_bets, open_bets.c.uid == bets.c.uid))
        .where(placed, open_bets.c.uid.is_(None))
        .order_by(bets.c.uid)
        .limit(LIMIT)
    )
    for (uid,) in connection.execute(missing):
        yield f"bet {uid} is placed but not among the open holds (open_bets)"
    extra = (
        select(open_bets.c.uid, bets.c.state)
        .select_from(open_bets.outerjoin(bets, bets.c.uid == open_bets.c.uid))
        .where(or_(bets.c.uid.is_(None), not_(placed), bets.c.placed_at != open_bets.c.placed_at))
        .order_by(open_bets.c.uid)
        .limit(LIMIT)
    )
    for uid, state in connection.execute(extra):
        what = "no bet" if state is None else f"bet is {state}"
        yield f"open hold {uid} in open_bets does not match its bet ({what})"


def _held_equals_open_holds(connection: Connection, dialect: Dialect) -> Iterator[str]:
    """Held money equals the open holds, per user and currency."""
    open_holds = (
        select(
            (literal("user:") + bets.c.user_uid + literal(":held")).label("name"),
            bets.c.currency,
            dialect.exact_sum(bets.c.amount).label("stakes"),
            dialect.exact_sum(bets.c.rake).label("rake"),
        )
        .where(bets.c.state == BetState.PLACED.value, bets.c.funding != Funding.FREE.value)
        .group_by(bets.c.user_uid, bets.c.currency)
        .subquery()
    )
    rows = connection.execute(
        select(
            accounts.c.name,
            accounts.c.currency,
            accounts.c.balance,
            open_holds.c.stakes,
            open_holds.c.rake,
        )
        .select_from(
            accounts.outerjoin(
                open_holds,
                and_(
                    open_holds.c.name == accounts.c.name,
                    open_holds.c.currency == accounts.c.currency,
                ),
            )
        )
        .where(accounts.c.kind == "held")
    )
    found = 0
    for name, currency, balance, stakes, rake in rows:
        # Added here, exactly: stake and rake totals may each be beyond what SQL adds safely.
        holds = int(stakes or 0) + int(rake or 0)
        if balance != holds:
            found += 1
            if found <= LIMIT:
                yield f"account {name} {currency} holds {balance} but its open bets total {holds}"
