"""Huge refunds and settles, set-based: staged once, validated and written by a few statements.

The domain (``refund_many``/``settle_many``) decides a request bet by bet in Python, at 40 to 70
µs a bet. Above a threshold (:data:`ledger.writer.SET_BASED_FROM`) the writer stages the
request's items into a temporary table instead (one ``executemany`` on SQLite, ``COPY`` on
Postgres) and this module finds the first item the domain would refuse, and else writes what
the domain would have written, with ``INSERT ... SELECT`` and ``UPDATE ... FROM``:

- the bet states (each bet closed by its first mention; a later one is the replay or conflict
  it would be in the domain), and the closed bets out of ``open_bets``;
- the postings, per chunk of :data:`ledger.writer.CHUNK` items a transaction of its own with the
  same key, the same per-bet user legs in item order and the same summed house legs after them;
- the balances and every posting's running balance.

The domain stays the specification: the writer asks it for the error of the first refused item
(so every error is the domain's own), and a property test runs random requests through both
paths (``tests/stores/test_set_based.py``).

Money stays exact on SQLite, whose ``+`` turns a sum past 64 bits into an inexact REAL: every
amount and balance the statements add is checked first to lie within a bound that no sum of the
request can pass (:func:`within_bounds`); a request beyond it is decided by the domain, in
Python integers. House legs are summed per chunk in SQL (within that bound), across chunks in
Python.

On Postgres every statement is set-based at any size: no ``NOT IN (subquery)``, which the
planner hashes only while the hash fits ``work_mem`` and otherwise runs once per item (a
million items: past the statement timeout, a 503); the close runs with a larger ``work_mem``
(:data:`ledger.stores.postgres.CLOSE_WORK_MEM`) and its temporary tables analysed.
"""

from __future__ import annotations

import functools
import operator
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, Literal, NamedTuple

from sqlalchemy import Connection, text

from ..domain import (
    HELD_SUFFIX,
    HOUSE_ENTRIES,
    HOUSE_PRIZES,
    HOUSE_RAKE,
    HOUSE_TICKETS,
    user_account,
)
from ..errors import CapacityExceeded, InsufficientFunds
from ..events import BET_REFUNDED, BET_SETTLED
from .base import ClosingOutcome, Retry, Staged
from .dialect import Dialect
from .schema import CAPACITY, postings, transactions

__all__ = [
    "STAGE_COLUMNS",
    "Collected",
    "bet_currencies",
    "bound",
    "collect",
    "discard",
    "may_note",
    "one_item_per_user",
    "stage",
    "staged_within",
    "within_bounds",
    "write",
]

Kind = Literal["refund", "settle"]

# One staged item: its position in the request, the bet it names, the user and tournament it
# says the bet belongs to; for a settle the payout in minor units of ``payout_currency``; for a
# refund the amount and rake it claims (minor units of the bet's currency, NULL: not sent);
# ``bad``: 1 when converting its payout failed (refused whatever the bet), 2 when that failure
# counts only for a known bet (a payout in the bet's own currency); ``note``: 1 when the domain
# may have something to note about it (an echo of secrets, a claimed amount it could not read);
# ``earlier``: NULL for the first item naming its bet (the one that closes it), else that first
# item's position (added by :func:`stage`, not by the writer). NULL rather than the item's own
# position: the planner estimates ``IS NULL`` from the column's statistics, where it guessed
# that ``pos = first`` kept one row in 200 and looked a million bets up one by one.
STAGE_COLUMNS = (
    ("pos", "key"),
    ("uid", "int"),
    ("user_uid", "text"),
    ("pool_uid", "int"),
    ("payout", "amount"),
    ("payout_currency", "text"),
    ("claimed_amount", "amount"),
    ("claimed_rake", "amount"),
    ("bad", "int"),
    ("note", "int"),
    ("user_name", "text"),
    ("user_client", "text"),
    ("earlier", "int"),
)


TEMP_TABLES = (
    "close_stage",
    "close_rows",
    "close_legs",
    "close_deltas",
)


def _literal(value: str) -> str:
    # A SQL string literal inside text(), where a colon would start a bind parameter.
    return "'" + value.replace("'", "''").replace(":", "\\:") + "'"


USER = _literal(user_account(""))  # the prefix of a user's available account
HELD = _literal(HELD_SUFFIX)


def bound(items: int) -> int:
    """The largest magnitude of any amount or balance a set-based close of ``items`` adds in
    SQL: no running sum of the request (a user's legs, two per item at most, on a balance) can
    then leave a signed 64-bit integer."""
    return (2**62) // (4 * (items + 1))


def staged_within(rows: Sequence[Staged], limit: int) -> bool:
    """True when every amount the request itself names lies within ``limit``."""
    for column in (4, 6, 7):  # payout, claimed_amount, claimed_rake
        if max(map(abs, filter(None, map(itemgetter(column), rows))), default=0) > limit:
            return False
    return True


_not_none = functools.partial(operator.is_not, None)


def may_note(rows: Sequence[Staged]) -> bool:
    """True when some item may have something to note (``note``, or a claimed amount): else
    :func:`write` skips looking for them (a settle of a million items claims nothing)."""
    for column in (6, 7):  # claimed_amount, claimed_rake
        if any(map(_not_none, map(itemgetter(column), rows))):
            return True
    return any(map(itemgetter(9), rows))  # note


def bet_currencies(connection: Connection, dialect: Dialect, uids: Sequence[int]) -> set[str]:
    """The currencies of the recorded bets among ``uids``."""
    return dialect.bet_currencies(connection, uids)


def stage(connection: Connection, dialect: Dialect, rows: Sequence[Staged]) -> bool:
    """Load the request's items into ``close_stage``, each repeating an earlier item's bet with
    that item's position (found here, as the rows stream out: a ``GROUP BY`` of a million staged
    rows and a join with it cost the database more than a dictionary costs Python). True when
    some bet is named by more than one item."""
    discard(connection)
    repeats = len(set(map(_bet_uid, rows))) < len(rows)
    if repeats:
        dialect.stage(connection, "close_stage", STAGE_COLUMNS, _with_earlier(rows))
    else:
        # Every item names its own bet (a settle of distinct participants): ``earlier`` is
        # NULL throughout, left out of the rows and of the statement. Plain tuples: sqlite3
        # binds a tuple's values directly and a named tuple's one by one through the sequence
        # protocol. A million items staged on SQLite (benchmarks/settle_split.py's stage
        # step, measured alone): 2.62 -> 2.20 s.
        plain = map(tuple, rows)
        dialect.stage(connection, "close_stage", STAGE_COLUMNS, plain, len(STAGE_COLUMNS) - 1)
    dialect.analyze(connection, ("close_stage",))
    return repeats


_bet_uid = itemgetter(1)
_user_uid = itemgetter(2)


def _with_earlier(rows: Sequence[Staged]) -> Iterator[tuple[Any, ...]]:
    firsts: dict[int, int] = {}
    first = firsts.setdefault
    for row in rows:
        pos = row[0]
        earlier = first(row[1], pos)
        yield (*row, None if earlier == pos else earlier)


def discard(connection: Connection) -> None:
    """Drop the temporary tables (before a fall-back to the domain, and after a close)."""
    for name in TEMP_TABLES:
        _run(connection, f"DROP TABLE IF EXISTS {name}")


def _run(connection: Connection, sql: str, **params: Any) -> Any:
    return connection.execute(text(sql), params)


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
    _run(
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
    first, closing, outside = _run(
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
        _run(connection, "DELETE FROM close_rows WHERE closes = 0")
    dialect.analyze(connection, ("close_rows",))
    return Collected(None, int(closing), int(outside))


# The legs of each closed bet, in the domain's order (leg 0, then leg 1): see domain.refund
# (transfer from held back to where the hold came from) and domain.settle (release the hold,
# then the payout). House legs are summed per chunk in Python (house_legs below).
_LEGS = {
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
    for leg, account_kind, account, currency, amount, when in _LEGS[kind]:
        _run(
            connection,
            f"""INSERT INTO close_legs
                SELECT pos, {leg}, '{account_kind}', {account}, {currency}, {amount}, uid
                FROM close_rows WHERE {when}""",  # noqa: S608 - fixed SQL, no input
        )
    dialect.analyze(connection, ("close_legs",))
    if not one_user_each:
        _sum_legs_per_account(connection, dialect)
    outside = _run(
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
    _run(
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


def write(
    connection: Connection,
    dialect: Dialect,
    kind: Kind,
    key: str,
    chunk: int,
    request_id: str | None,
    event_slots: Callable[[int], tuple[int, int]],
    items: int,
    notes: bool,
    one_user_each: bool,
    closing: int,
) -> ClosingOutcome:
    """Write what the staged request of ``items`` items does (after :func:`collect` found
    nothing refused and :func:`within_bounds` agreed): bet states, postings, balances, one event
    per bet closed (ordinals from ``event_slots``); transaction ``key:<n>`` for the items of
    chunk ``n``. ``notes``: some item may have something to note (:func:`may_note`);
    ``one_user_each``: as :func:`within_bounds` was told; ``closing``: how many bets the
    request closes (:attr:`Collected.closing`, the rows of ``close_rows``)."""
    closed_at = dialect.timestamp(datetime.now(UTC))
    # Bets first, as the domain path does: one closed meanwhile by a concurrent request (READ
    # COMMITTED on Postgres) makes the request run again, and see it.
    payout = "c.payout" if kind == "settle" else "NULL"
    payout_currency = "c.payout_currency" if kind == "settle" else "NULL"
    changed = _run(
        connection,
        f"""UPDATE bets SET state = :state, payout = {payout},
                payout_currency = {payout_currency}, closed_at = :closed_at
            FROM close_rows c WHERE bets.uid = c.uid AND bets.state = 'placed'""",  # noqa: S608
        state="refunded" if kind == "refund" else "settled",
        closed_at=closed_at,
    ).rowcount
    if changed != closing:
        raise Retry(f"{closing - changed} bet(s) were closed by a concurrent request")
    _run(connection, "DELETE FROM open_bets WHERE uid IN (SELECT uid FROM close_rows)")
    _append_events(connection, kind, closing, request_id, event_slots, closing == items)
    # The user accounts (close_deltas, from within_bounds), each changed once by the request's
    # total for it, in key order like every other writer's: credits added (the account
    # created when new), debits (the held money released) taken only from accounts that hold
    # them; a zero total changes nothing.
    deltas = _deltas(one_user_each)
    _run(
        connection,
        f"""INSERT INTO accounts (name, currency, kind, balance)
            SELECT d.account, d.currency, d.kind, d.delta FROM {deltas} d WHERE d.delta > 0
            ORDER BY d.account, d.currency
            ON CONFLICT (name, currency)
            DO UPDATE SET balance = accounts.balance + excluded.balance""",  # noqa: S608
    )
    debited = _run(
        connection,
        f"""UPDATE accounts SET balance = accounts.balance + d.delta
            FROM {deltas} d
            WHERE d.delta < 0 AND accounts.name = d.account
              AND accounts.currency = d.currency""",  # noqa: S608 - fixed SQL, no input
    ).rowcount
    debits, most_legs = _run(
        connection,
        f"SELECT sum(CASE WHEN delta < 0 THEN 1 ELSE 0 END), max(legs) FROM {deltas} d",  # noqa: S608
    ).one()
    if debited != (debits or 0):
        # A held account that is missing: never, while holds are what placed them.
        raise InsufficientFunds("a user balance would go below zero")
    house, parts = _house_legs(connection, kind, chunk)
    ids = dialect.allocate_transaction_ids(connection, len(parts)) if parts else []
    house_rows = _house_running_balances(connection, dialect, kind, house, parts)
    created_at = dialect.timestamp(datetime.now(UTC))
    if ids:
        # Every chunk's user legs in one statement, each with its chunk's transaction: one pass
        # over the legs (a statement per chunk scanned all of them again: twenty times at a
        # million items) and one run of the journal's per-statement checks. Each leg's running
        # balance counts up, leg by leg in the request's order, to the balance the update left
        # (read under the lock the update holds), computed as the rows go in: no temporary
        # table of a million postings written and read back: the balance after a leg is the
        # balance after the update less the legs that follow it on its account, one running sum
        # over each account's legs taken from the last (one sort, one window). When no account
        # has more than one leg (one entry per user, the usual tournament), a leg's balance
        # after is its account's: no sort and no window (about 1 s of Postgres's time at a million).
        # Each account's legs keep the order of their running balances; the house legs follow,
        # chunk by chunk.
        txn_of = " ".join(
            f"WHEN {part} THEN {txn_id}" for txn_id, part in zip(ids, parts, strict=True)
        )
        after = (
            "a.balance"
            if most_legs == 1
            else """a.balance + l.amount
                    - sum(l.amount) OVER (PARTITION BY l.account, l.currency
                                          ORDER BY l.pos DESC, l.leg DESC
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"""
        )
        _run(
            connection,
            f"""INSERT INTO postings (txn_id, account, currency, amount, bet_uid, balance_after)
                SELECT CASE l.pos / {chunk} {txn_of} END, l.account, l.currency, l.amount,
                       l.bet_uid, {after}
                FROM close_legs l
                JOIN accounts a ON a.name = l.account AND a.currency = l.currency
                ORDER BY l.pos, l.leg""",  # noqa: S608 - integers, no input
        )
    for txn_id, part in zip(ids, parts, strict=True):
        dialect.insert_rows(
            connection,
            postings,
            ("txn_id", "account", "currency", "amount", "bet_uid", "balance_after"),
            [(txn_id, *row) for row in house_rows.get(part, [])],
        )
        dialect.insert_rows(
            connection,
            transactions,
            ("id", "idempotency_key", "kind", "user_uid", "reference", "created_at"),
            [(txn_id, f"{key}:{part}", kind, None, None, created_at)],
        )
    # Every item closed its bet (the usual case: no re-send, no bet named twice): none left
    # unchanged, and no anti-join of a million staged items with a million closed ones.
    unchanged = (
        []
        if closing == items
        else [
            int(pos)
            for (pos,) in _run(
                connection,
                # NOT EXISTS, an anti-join on close_rows' key: Postgres hashes a NOT IN list
                # only while it fits work_mem, and past that (a million items) compares every
                # item with every closed one, for hours: the statement timeout's 503.
                "SELECT s.pos FROM close_stage s WHERE NOT EXISTS "
                "(SELECT 1 FROM close_rows c WHERE c.pos = s.pos) ORDER BY s.pos",
            )
        ]
    )
    noted: list[int] = []
    if notes:
        # The first condition reads the staged item alone, so the database filters the items
        # before the join (a settle claims nothing: usually none are left).
        found = _run(
            connection,
            """SELECT s.pos FROM close_stage s JOIN close_rows c ON c.pos = s.pos
               WHERE (s.note = 1 OR s.claimed_amount IS NOT NULL OR s.claimed_rake IS NOT NULL)
                 AND (s.note = 1 OR COALESCE(s.claimed_amount <> c.amount, FALSE)
                      OR COALESCE(s.claimed_rake <> c.rake, FALSE))
               ORDER BY s.pos""",
        )
        noted = [int(pos) for (pos,) in found]
    # The staged items stay for the directory's upsert of their users; the caller discards.
    return ClosingOutcome(unchanged, noted)


def _append_events(
    connection: Connection,
    kind: Kind,
    count: int,
    request_id: str | None,
    event_slots: Callable[[int], tuple[int, int]],
    every: bool,
) -> None:
    """A ``bet.refunded`` or ``bet.settled`` event per bet closed, in the request's order: the
    rows :func:`ledger.events.closed_rows` makes for the domain path. ``every``: each item
    closed its bet (the positions 0 .. count - 1 are all in ``close_rows``)."""
    if not count:
        return
    grp, first = event_slots(count)
    # Each closed bet's place among them: its item's position when every item closed one (no
    # sort of a million rows and no window over them: 0.55 s of Postgres's time, EXPLAIN
    # ANALYZE), else its rank by position.
    ordinal = "pos" if every else "row_number() OVER (ORDER BY pos) - 1"
    order = "" if every else "ORDER BY pos"
    if kind == "settle":
        event, payout, payout_currency = BET_SETTLED, "payout", "payout_currency"
    else:
        event, payout, payout_currency = BET_REFUNDED, "NULL", "NULL"
    _run(
        connection,
        f"""INSERT INTO events (grp, ordinal, type, user_uid, pool_uid, bet_uid, currency,
                                amount, rake, payout, payout_currency, reference, request_id)
            SELECT :grp, :first + {ordinal}, :event, user_uid, pool_uid, uid, currency, amount,
                   rake, {payout}, {payout_currency}, NULL, :request_id
            FROM close_rows {order}""",  # noqa: S608 - fixed SQL, no input
        grp=grp,
        first=first,
        event=event,
        request_id=request_id,
    )


# The house legs of each chunk, summed per account and currency as Transaction.journal sums
# them: (house account, currency column, amount expression, which closed bets).
_HOUSE = {
    "refund": [
        (HOUSE_TICKETS, "currency", "amount + rake", "funding = 'ticket' AND amount + rake <> 0"),
    ],
    "settle": [
        (HOUSE_ENTRIES, "currency", "amount", "funding <> 'free' AND amount + rake <> 0"),
        (HOUSE_RAKE, "currency", "rake", "funding <> 'free' AND amount + rake <> 0"),
        (HOUSE_PRIZES, "payout_currency", "-payout", "payout <> 0"),
    ],
}


def _house_legs(
    connection: Connection, kind: Kind, chunk: int
) -> tuple[dict[int, list[tuple[str, str, int]]], list[int]]:
    """Per chunk, the house legs ``(account, currency, amount)``, sorted, zero sums left out;
    and the chunks with a user leg (each a transaction), in order."""
    legs = _HOUSE[kind]
    # Every leg's sum in one pass over the closed bets, grouped by chunk and by each currency
    # column a leg reads (a pass per leg read them all again: 0.2 s each at a million). Summed
    # in SQL within the bound (within_bounds): no sum of the request's amounts leaves 64 bits.
    # A house total over the request may: that one is Python's.
    columns = sorted({currency for _, currency, _, _ in legs})
    totals = ", ".join(f"sum(CASE WHEN {when} THEN {amount} END)" for _, _, amount, when in legs)
    # Whether a closed bet has a user leg: the conditions close_legs was filled by (a pass of
    # its own over the legs, SELECT DISTINCT, cost 0.17 s of the server's time at a million).
    with_legs = " OR ".join(f"({when})" for *_, when in _LEGS[kind])
    rows = _run(
        connection,
        f"SELECT pos / {chunk}, {', '.join(columns)}, {totals}, "  # noqa: S608 - no input
        f"max(CASE WHEN {with_legs} THEN 1 ELSE 0 END) FROM close_rows "
        f"GROUP BY pos / {chunk}, {', '.join(columns)}",
    )
    found: dict[int, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    parts: set[int] = set()
    for row in rows:
        part = int(row[0])
        codes = dict(zip(columns, row[1 : 1 + len(columns)], strict=True))
        sums = row[1 + len(columns) : -1]
        for (account, currency, _, _), value in zip(legs, sums, strict=True):
            if value is not None:
                found[part][(account, codes[currency])] += int(value)
        if row[-1]:
            parts.add(part)
    house = {
        part: [(name, code, value) for (name, code), value in sorted(sums.items()) if value]
        for part, sums in found.items()
    }
    return house, sorted(parts)


def _house_running_balances(
    connection: Connection,
    dialect: Dialect,
    kind: Kind,
    house: dict[int, list[tuple[str, str, int]]],
    parts: list[int],
) -> dict[int, list[tuple[str, str, int, None, int]]]:
    """Apply the house legs to the house balances; per chunk, each leg with its running balance
    ``(account, currency, amount, None, balance_after)``."""
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for part in parts:
        for name, code, value in house.get(part, []):
            if not -CAPACITY <= value <= CAPACITY:
                # The message of SqlUnitOfWork.post's own refusal: the domain path's.
                raise CapacityExceeded(
                    f"{kind}: a {code} leg on {name} would exceed the {len(str(CAPACITY))} "
                    "digits a store holds"
                )
            totals[(name, code)] += value
    after = dialect.upsert_balances(
        connection,
        [(name, code, "house", delta) for (name, code), delta in sorted(totals.items()) if delta],
    )
    # Legs that cancel out over the request leave their account as it was.
    still = sorted(key for key in totals if key not in after)
    if still:
        current = dialect.lock_balances(connection, still)
        after.update({key: current.get(key, 0) for key in still})
    running = {key: after.get(key, 0) - delta for key, delta in totals.items()}
    rows: dict[int, list[tuple[str, str, int, None, int]]] = {}
    for part in parts:
        for name, code, value in house.get(part, []):
            balance = running[(name, code)] = running[(name, code)] + value
            rows.setdefault(part, []).append((name, code, value, None, balance))
    return rows
