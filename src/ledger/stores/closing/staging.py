"""A huge close's items staged into a temporary table, and the bounds within which its sums stay
exact."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any, Literal

from sqlalchemy import Connection

from ...domain import (
    HELD_SUFFIX,
    user_account,
)
from ..base import Staged
from ..dialect import Dialect
from . import statements

# A staged row's fields by name (ledger.stores.base.Staged), read by position in C: the rows of a
# million-item close are read several times over, and itemgetter over a position costs nothing
# per row where an attribute costs a Python-level descriptor.
_UID, _USER_UID, _PAYOUT, _CLAIMED_AMOUNT, _CLAIMED_RAKE, _NOTE = (
    Staged._fields.index(name)
    for name in ("uid", "user_uid", "payout", "claimed_amount", "claimed_rake", "note")
)

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
    for column in (_PAYOUT, _CLAIMED_AMOUNT, _CLAIMED_RAKE):
        if max(map(abs, filter(None, map(itemgetter(column), rows))), default=0) > limit:
            return False
    return True


_not_none = functools.partial(operator.is_not, None)


def may_note(rows: Sequence[Staged]) -> bool:
    """True when some item may have something to note (``note``, or a claimed amount): else
    :func:`write` skips looking for them (a settle of a million items claims nothing)."""
    for column in (_CLAIMED_AMOUNT, _CLAIMED_RAKE):
        if any(map(_not_none, map(itemgetter(column), rows))):
            return True
    return any(map(itemgetter(_NOTE), rows))


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


_bet_uid = itemgetter(_UID)


_user_uid = itemgetter(_USER_UID)


def _with_earlier(rows: Sequence[Staged]) -> Iterator[tuple[Any, ...]]:
    firsts: dict[int, int] = {}
    first = firsts.setdefault
    for row in rows:
        pos = row.pos
        earlier = first(row.uid, pos)
        yield (*row, None if earlier == pos else earlier)


def discard(connection: Connection) -> None:
    """Drop the temporary tables (before a fall-back to the domain, and after a close)."""
    for name in TEMP_TABLES:
        statements.run(connection, f"DROP TABLE IF EXISTS {name}")
