"""What the staged items mean for each bet: the first refusal, or the rows to write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import Connection

from ..base import Staged
from ..dialect import Dialect
from . import statements
from .staging import HELD, USER, Kind, _user_uid


# Whether a settled bet (payout p, currency c) has the payout an item (q, d) claims; as the
# domain's _same_payout: both zero, or equal in amount and currency. NULLs count as different.
def _same(p: str, c: str, q: str, d: str) -> str:
    return f"((COALESCE({p}, 0) = 0 AND {q} = 0) OR COALESCE({p} = {q} AND {c} = {d}, FALSE))"


_OTHER_OWNER = "(b.user_uid <> s.user_uid OR b.pool_uid <> s.pool_uid)"


# The items the domain refuses, each assuming every item before it was accepted (the domain
# stops at the first refusal, so later ones never matter): see domain.refund and domain.settle.
_REFUSED = {
    "refund": f"""
        b.uid IS NULL
        OR (s.earlier IS NULL
            AND (b.state = 'settled' OR (b.state = 'placed' AND {_OTHER_OWNER})))
    """,
    "settle": f"""
        s.bad = 1 OR (s.bad = 2 AND b.uid IS NOT NULL) OR b.uid IS NULL
        OR (s.earlier IS NULL AND b.state = 'refunded')
        OR (b.state = 'settled'
            AND NOT {_same("b.payout", "b.payout_currency", "s.payout", "s.payout_currency")})
        OR (b.state = 'placed' AND s.earlier IS NULL AND {_OTHER_OWNER})
    """,
}


# A later item naming a bet an earlier item of the request closes: a settle refuses it when its
# payout is not the first item's (``o``, joined only when some bet is named twice).
_REPEATED = {
    "refund": None,
    "settle": f"""
        (b.state = 'placed' AND s.earlier IS NOT NULL
         AND NOT {_same("o.payout", "o.payout_currency", "s.payout", "s.payout_currency")})
    """,
}


# The columns of ``close_rows``: per item, its position and bet, the bet's terms as recorded,
# the payout it names; ``refused``: 1 when the domain would refuse the item (see _REFUSED);
# ``closes``: 1 when the item closes its bet (its first mention, the bet still placed).
CLOSE_ROWS_COLUMNS = (
    ("pos", "key"),
    ("uid", "int"),
    ("user_uid", "text"),
    ("pool_uid", "int"),
    ("currency", "text"),
    ("amount", "amount"),
    ("rake", "amount"),
    ("funding", "text"),
    ("payout", "amount"),
    ("payout_currency", "text"),
    ("refused", "int"),
    ("closes", "int"),
)


class Collected(NamedTuple):
    """What :func:`collect` found: the position of the first item the domain would refuse
    (``None``: none), how many items close their bet, and how many of those name an amount,
    rake or payout beyond the request's bound (:func:`bound`)."""

    refused: int | None
    closing: int
    outside: int


def collect(
    connection: Connection, dialect: Dialect, kind: Kind, repeats: bool, items: int, limit: int
) -> Collected:
    """Join every staged item with its bet, once: the first item the domain would refuse, or
    the bets this request closes in ``close_rows``, in item order (a bet is closed by its first
    mention, if it is still placed), counted. ``repeats``: some bet is named by more than one
    item (as :func:`stage` found); ``items``: how many are staged; ``limit``: the request's
    bound, which the closing items' amounts are counted against in the same pass.

    One join for both: the refusals were a join of every item with its bet of their own, and
    the bets closed a second one (a million items on Postgres: 1.1 s of the server's time for
    the first, which the second's scan of the joined rows replaces with 0.1 s). One scan of the
    joined rows counts all three: the bound and the write's count of closed bets were a scan
    each (0.2 to 0.3 s and 0.08 s of the server's time at a million)."""
    dialect.temp_table(connection, "close_rows", CLOSE_ROWS_COLUMNS)
    refused, repeated = _REFUSED[kind], _REPEATED[kind]
    first_item = ""
    if repeats and repeated is not None:
        refused = f"{refused} OR {repeated}"
        first_item = "LEFT JOIN close_stage o ON o.pos = s.earlier"
    # CASE: a condition that is NULL (an unknown bet's columns) is no refusal, as in a WHERE.
    statements.run(
        connection,
        f"""INSERT INTO close_rows
            SELECT s.pos, s.uid, b.user_uid, b.pool_uid, b.currency, b.amount, b.rake,
                   b.funding, s.payout, s.payout_currency,
                   CASE WHEN {refused} THEN 1 ELSE 0 END,
                   CASE WHEN s.earlier IS NULL AND b.state = 'placed' THEN 1 ELSE 0 END
            FROM close_stage s {first_item}
            LEFT JOIN bets b ON b.uid = s.uid
            ORDER BY s.pos""",  # noqa: S608 - fixed SQL, no input
    )
    first, closing, outside = statements.run(
        connection,
        """SELECT min(CASE WHEN refused = 1 THEN pos END), COALESCE(sum(closes), 0),
                  COALESCE(sum(CASE WHEN closes = 1 AND NOT (
                      amount BETWEEN 0 AND :limit AND rake BETWEEN 0 AND :limit
                      AND COALESCE(payout, 0) BETWEEN -:limit AND :limit) THEN 1 END), 0)
           FROM close_rows""",
        limit=limit,
    ).one()
    if first is not None:
        return Collected(int(first), int(closing), int(outside))
    if closing != items:
        # Re-sent items, or a bet named twice: only the closing ones go on.
        statements.run(connection, "DELETE FROM close_rows WHERE closes = 0")
    dialect.analyze(connection, ("close_rows",))
    return Collected(None, int(closing), int(outside))


# The legs of each closed bet, in the domain's order (leg 0, then leg 1): see domain.refund
# (transfer from held back to where the hold came from) and domain.settle (release the hold,
# then the payout). House legs are summed per chunk in Python (house_legs below).
LEGS = {
    "refund": [
        ("0", "held", f"{USER} || user_uid || {HELD}", "currency",
         "-(amount + rake)", "funding <> 'free' AND amount + rake <> 0"),
        ("1", "available", f"{USER} || user_uid", "currency",
         "amount + rake", "funding = 'cash' AND amount + rake <> 0"),
    ],
    "settle": [
        ("0", "held", f"{USER} || user_uid || {HELD}", "currency",
         "-(amount + rake)", "funding <> 'free' AND amount + rake <> 0"),
        ("1", "available", f"{USER} || user_uid", "payout_currency",
         "payout", "payout <> 0"),
    ],
}  # fmt: skip


def within_bounds(
    connection: Connection,
    dialect: Dialect,
    kind: Kind,
    limit: int,
    one_user_each: bool,
    collected: Collected,
) -> bool:
    """Collect the legs of the bets this request closes (``close_rows``, from :func:`collect`);
    True when every amount they add and every balance they touch lies within ``limit`` (see
    :func:`bound`). ``one_user_each``: no two items name the same user
    (:func:`one_item_per_user`); ``collected``: what :func:`collect` counted."""
    if collected.outside:
        return False
    dialect.temp_table(
        connection,
        "close_legs",
        (
            ("pos", "int"),
            ("leg", "int"),
            ("kind", "text"),
            ("account", "text"),
            ("currency", "text"),
            ("amount", "amount"),
            ("bet_uid", "int"),
        ),
    )
    for leg, account_kind, account, currency, amount, when in LEGS[kind]:
        statements.run(
            connection,
            f"""INSERT INTO close_legs
                SELECT pos, {leg}, '{account_kind}', {account}, {currency}, {amount}, uid
                FROM close_rows WHERE {when}""",  # noqa: S608 - fixed SQL, no input
        )
    dialect.analyze(connection, ("close_legs",))
    if not one_user_each:
        _sum_legs_per_account(connection, dialect)
    outside = statements.run(
        connection,
        f"""SELECT count(*) FROM accounts a
            JOIN {_deltas(one_user_each)} d ON a.name = d.account AND a.currency = d.currency
            WHERE NOT (a.balance BETWEEN -:limit AND :limit)""",  # noqa: S608 - fixed SQL
        limit=limit,
    ).scalar()
    return not outside


def _sum_legs_per_account(connection: Connection, dialect: Dialect) -> None:
    # Each account the legs touch, with the request's total for it (the write adds it) and its
    # number of legs (one each: the write needs no running sum): the accounts to check in
    # within_bounds, and to change in write. In key order, like every other writer's.
    dialect.temp_table(
        connection,
        "close_deltas",
        (
            ("account", "text"),
            ("currency", "text"),
            ("kind", "text"),
            ("delta", "amount"),
            ("legs", "int"),
        ),
    )
    statements.run(
        connection,
        """INSERT INTO close_deltas
           SELECT account, currency, min(kind), sum(amount), count(*) FROM close_legs
           GROUP BY account, currency ORDER BY account, currency""",
    )
    dialect.analyze(connection, ("close_deltas",))


# close_deltas when no two items name the same user: then no two legs share an account (a
# user's legs are on its held and its available account, and no user uid ends in the held
# suffix, so no user's available account is another's held one), and each account's total is
# its one leg. Read straight from the legs, without grouping, sorting and writing them again
# (on Postgres 1.4 s of the server's time at a million).
_ONE_LEG_EACH = "(SELECT account, currency, kind, amount AS delta, 1 AS legs FROM close_legs)"


def _deltas(one_user_each: bool) -> str:
    return _ONE_LEG_EACH if one_user_each else "close_deltas"


def one_item_per_user(rows: Sequence[Staged]) -> bool:
    """True when no two of the staged items name the same user: the close then needs no sum of
    each account's legs (see :data:`_ONE_LEG_EACH`). The claimed user is the bet's own for
    every item that closes one: a bet of another user is refused (:data:`_OTHER_OWNER`)."""
    return len(set(map(_user_uid, rows))) == len(rows)
