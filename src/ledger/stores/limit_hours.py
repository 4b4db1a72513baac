"""What a limit's window holds, read in bounded work: hourly sums, and the rows of one hour.

A check must know, for each window a user has a limit for (24 hours, 7 days, 30 days ending
now), the deposits, stakes and returns in it. Summing ``limit_activity`` over the window costs
one row per movement: a player with a thousand entries a day would pay tens of thousands of rows
a check. So every movement is also added to ``limit_hours``, one row per user, currency and
clock hour, and a window ``(cut, now]`` is read as

    the hours that start after ``cut``                    (each lies wholly in the window)
  + the movements with ``cut < at < hour_of(cut) + 1 hour`` (the one hour the cut splits)

Invariant: this equals the sum of the movements with ``at > cut``, exactly (no rounding to the
hour: a limit frees room at the instant the regulator's rolling window says). A check reads at
most 721 hour rows per user and currency, and one hour of movements per period limited.
Proved by ``tests/stores/test_limit_hours.py`` (any movements, any cut) and, through the whole
ledger, by ``tests/service/test_limits_machine.py``.

Every writer of ``limit_activity`` adds to ``limit_hours`` in the same transaction (``ADD_HOURS``,
``ADD_SET_RETURNS``); pruning drops the hours that start at or before the longest window's cut,
which no check reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from ..domain.limits import PERIODS, Period, Use

__all__ = ["ADD_HOURS", "ADD_SET_RETURNS", "HOUR", "SET_CREDITS", "hour_of", "window_use"]

HOUR = timedelta(hours=1)


def hour_of(moment: datetime) -> datetime:
    """The start of the clock hour ``moment`` falls in (UTC)."""
    return moment.replace(minute=0, second=0, microsecond=0)


def window_use(
    hours: Iterable[tuple[datetime, int, int, int]],
    edges: Iterable[tuple[datetime, int, int, int]],
    now: datetime,
    periods: Iterable[Period],
) -> dict[Period, Use]:
    """What the window of each of ``periods`` ending at ``now`` holds, from ``hours`` (start,
    deposit, stake, returned: at least those starting after the longest cut) and ``edges``
    (movements: at least those in each period's split hour)."""
    hours, edges = list(hours), list(edges)
    found: dict[Period, Use] = {}
    for period in periods:
        cut = now - PERIODS[period]
        split_end = hour_of(cut) + HOUR
        use = Use()
        for start, deposit, stake, returned in hours:
            if start > cut:
                use = use.plus(Use(deposit, stake, returned))
        for at, deposit, stake, returned in edges:
            if cut < at < split_end:
                use = use.plus(Use(deposit, stake, returned))
        found[period] = use
    return found


# Written with "?" placeholders, {add} the exact addition of stored amounts (SQLite's
# ledger_add, Postgres' numeric_add) and {sum} their exact sum, filled in by the store.
ADD_HOURS = (
    "INSERT INTO limit_hours (user_uid, currency, hour, deposit, stake, returned) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (user_uid, currency, hour) DO UPDATE SET "
    "deposit = {add}(limit_hours.deposit, excluded.deposit), "
    "stake = {add}(limit_hours.stake, excluded.stake), "
    "returned = {add}(limit_hours.returned, excluded.returned)"
)
# A set-based close's credits to the available accounts of limited users: postings after a
# given id (?) of transactions whose key matches a LIKE pattern (?).
SET_CREDITS = (
    "FROM limited_users l JOIN postings p ON p.account = 'user:' || l.user_uid AND p.id > ? "
    "JOIN transactions t ON t.id = p.txn_id "
    "WHERE t.idempotency_key LIKE ? ESCAPE '\\' AND p.amount > 0"
)
ADD_SET_RETURNS = (
    "INSERT INTO limit_hours (user_uid, currency, hour, deposit, stake, returned) "
    "SELECT l.user_uid, p.currency, ?, 0, 0, {sum}(p.amount) " + SET_CREDITS + " "
    "GROUP BY l.user_uid, p.currency ORDER BY 1, 2 "
    "ON CONFLICT (user_uid, currency, hour) DO UPDATE SET "
    "returned = {add}(limit_hours.returned, excluded.returned)"
)
