"""Responsible-gambling limits in SQL: the unit of work's :class:`SqlLimits` (its ``limits``).

Invariant: a deposit or a Place Bet of a user without a ``limited_users`` row costs one
primary-key probe (one statement for the whole group of requests, no row locked); for a limited
user, the check reads its limits, exclusions and the activity of the longest window (a range of
``limit_activity_window``) after locking its ``limited_users`` row (``FOR UPDATE`` on Postgres,
SQLite's writer holding the database), and the activity it admits is written before that lock
ends: two writers can never both see room that only one of them may use. A change of limit or
an exclusion takes the same row's lock. Proved by ``tests/service/test_limits_machine.py`` and
``tests/stores/test_limits_concurrency.py``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update

from ..domain.limit_gate import Gate, UserState
from ..domain.limits import PERIODS, Activity, Exclusion, Limit
from .dialect import Dialect
from .limit_tables import exclusions, limit_activity, limit_changes, limited_users, limits
from .schema import from_stored

__all__ = ["LONGEST", "LimitChange", "SqlLimits"]

# The longest window: what a check reads, and what pruning keeps.
LONGEST: timedelta = max(PERIODS.values())

LimitChange = tuple[Limit, Limit | None, str, str | None]  # new, old, by, reason

P = ParamSpec("P")
R = TypeVar("R")


def _translated(
    method: Callable[Concatenate[SqlLimits, P], R],
) -> Callable[Concatenate[SqlLimits, P], R]:
    """The driver's errors out as :mod:`ledger.errors` (a deadlock: ``Retry``)."""

    def run(self: SqlLimits, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._translate():
            return method(self, *args, **kwargs)

    functools.update_wrapper(run, method)
    return run


class SqlLimits:
    """What one unit of work reads and writes of the limits (``uow.limits``)."""

    def __init__(
        self,
        connection: Callable[[], Connection],
        dialect: Dialect,
        clock: Callable[[], datetime],
        translate: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> None:
        self._connection = connection
        self._dialect = dialect
        self.clock = clock
        self._translate = translate
        # The limits' probe already made with a Place Bet's reads: (users, the limited).
        self._probed: tuple[list[str], list[str]] | None = None

    @property
    def _conn(self) -> Connection:
        return self._connection()

    # --- enforcing ---------------------------------------------------------------------------

    @_translated
    def gate(self, users: Collection[str]) -> Gate:
        """The gate for writes of ``users`` now: empty (admits everything, records nothing)
        unless some of them are limited, whose state is then read under their lock."""
        now = self.clock()
        probed, self._probed = self._probed, None
        if probed is not None and probed[0] == sorted(users):
            found = probed[1]
        else:
            found = self._lock(users) if users else []
        if not found:
            return Gate({}, now)
        return Gate(self._states(found, now), now)

    @_translated
    def record(self, gate: Gate) -> None:
        """Write what ``gate`` admitted."""
        rows = [
            {
                "user_uid": user,
                "currency": currency,
                "at": item.at,
                "deposit": item.deposit,
                "stake": item.stake,
                "returned": item.returned,
            }
            for user, currency, item in gate.recorded
        ]
        if rows:
            self._dialect.send_queued(self._conn)
            self._conn.execute(insert(limit_activity), rows)
        gate.recorded.clear()

    @_translated
    def record_returns(self, credits: Mapping[tuple[str, str], int]) -> None:
        """Record payouts and refunds credited to users' available accounts, for those of them
        that are limited (never refused: no lock taken, returns only add room)."""
        users = {user for user, _ in credits}
        limited = set(self._limited(users, lock=False)) if users else set()
        now = self.clock()
        rows = [
            {"user_uid": user, "currency": currency, "at": now, "deposit": 0, "stake": 0,
             "returned": amount}
            for (user, currency), amount in sorted(credits.items())
            if user in limited and amount
        ]  # fmt: skip
        if rows:
            self._conn.execute(insert(limit_activity), rows)

    @_translated
    def record_set_returns(self, key: str, after_posting: int) -> None:
        """After a set-based close written under transactions ``key:<n>``: its credits to the
        available accounts of limited users, in one INSERT ... SELECT joined to them."""
        self._dialect.run(
            self._conn,
            _marks(self._conn, _SET_RETURNS),
            (self._dialect.timestamp(self.clock()), after_posting, _like_prefix(key)),
        )

    @_translated
    def last_posting(self) -> int:
        """The highest posting id so far (0 before the first)."""
        found = self._dialect.run(self._conn, "SELECT max(id) FROM postings").fetchone()
        return 0 if found is None or found[0] is None else int(found[0])

    def probed(self, users: list[str], limited: list[str]) -> None:
        """The probe of ``users`` (sorted) made with the same transaction's reads, their
        ``limited`` rows locked: the next :meth:`gate` for them uses it."""
        self._probed = (users, limited)

    def _lock(self, users: Collection[str]) -> list[str]:
        return self._limited(users, lock=True)

    def _limited(self, users: Collection[str], *, lock: bool) -> list[str]:
        """The limited users among ``users``; ``lock``: their rows locked (Postgres)."""
        ordered = sorted(users)
        postgres = self._conn.dialect.paramstyle != "qmark"
        sql = _marks(self._conn, _LIMITED.replace("?", ", ".join(["?"] * len(ordered))))
        if lock and postgres:
            sql += " ORDER BY user_uid FOR UPDATE"
        return [row[0] for row in self._dialect.run(self._conn, sql, ordered).fetchall()]

    def _states(self, users: Sequence[str], now: datetime) -> dict[str, UserState]:
        conn = self._conn
        found_limits: dict[str, list[Limit]] = {user: [] for user in users}
        for row in conn.execute(select(limits).where(limits.c.user_uid.in_(users))):
            found_limits[row.user_uid].append(_limit(row))
        found_exclusions: dict[str, list[Exclusion]] = {user: [] for user in users}
        for row in conn.execute(select(exclusions).where(exclusions.c.user_uid.in_(users))):
            found_exclusions[row.user_uid].append(_exclusion(row))
        activity: dict[str, dict[str, list[Activity]]] = {user: {} for user in users}
        # Plain SQL, values converted here: a window may hold thousands of rows, and
        # SQLAlchemy's per-row processing cost 14 us a row (2,000 rows: 28 ms a check).
        # Only as far back as the longest period any of them has a limit for (none: an
        # exclusion alone reads no activity).
        longest = max(
            (PERIODS[item.period] for found in found_limits.values() for item in found),
            default=None,
        )
        sql = _ACTIVITY.replace("?)", ", ".join(["?"] * len(users)) + ")", 1)
        since = None if longest is None else self._dialect.timestamp(now - longest)
        rows = (
            []
            if since is None
            else self._dialect.run(conn, _marks(conn, sql), (*users, since)).fetchall()
        )
        moment = _moment_reader(conn)
        for user, currency, at, deposit, stake, returned in rows:
            activity[user].setdefault(currency, []).append(
                Activity(
                    moment(at), from_stored(deposit), from_stored(stake), from_stored(returned)
                )
            )
        return {
            user: UserState(
                tuple(found_limits[user]),
                tuple(found_exclusions[user]),
                {currency: tuple(items) for currency, items in activity[user].items()},
            )
            for user in users
        }

    # --- changing ----------------------------------------------------------------------------

    @_translated
    def mark_limited(self, user: str) -> None:
        """Make ``user`` a limited user, and lock its limit state (first, like every writer)."""
        now = self.clock()
        row = (user, self._dialect.timestamp(now))
        self._dialect.insert_rows(
            self._conn, limited_users, ("user_uid", "since"), [row], ignore_conflicts=True
        )
        self._lock([user])

    @_translated
    def user_limits(self, user: str) -> list[Limit]:
        """``user``'s limits, every currency."""
        rows = self._conn.execute(select(limits).where(limits.c.user_uid == user))
        return [_limit(row) for row in rows]

    @_translated
    def save_limit(self, user: str, change: LimitChange, effective_at: datetime) -> None:
        """Write ``user``'s limit as ``change`` leaves it, and the change in its history."""
        new, old, by, reason = change
        now = self.clock()
        values = {"amount": new.amount, "pending": new.pending, "pending_at": new.pending_at,
                  "updated_at": now}  # fmt: skip
        where = and_(
            limits.c.user_uid == user,
            limits.c.currency == new.currency,
            limits.c.kind == new.kind,
            limits.c.period == new.period,
        )
        if old is None:
            key = {"user_uid": user, "currency": new.currency, "kind": new.kind,
                   "period": new.period}  # fmt: skip
            self._conn.execute(insert(limits), [{**key, **values}])
        else:
            self._conn.execute(update(limits).where(where).values(**values))
        asked = new.pending if new.pending_at is not None else new.amount
        self._conn.execute(
            insert(limit_changes),
            [
                {
                    "user_uid": user,
                    "currency": new.currency,
                    "kind": new.kind,
                    "period": new.period,
                    "old": None if old is None else old.settled(now).amount,
                    "new": asked,
                    "asked_at": now,
                    "effective_at": effective_at,
                    "by": by,
                    "reason": reason,
                }
            ],
        )

    @_translated
    def user_exclusions(self, user: str) -> list[tuple[Exclusion, str]]:
        """``user``'s exclusions, oldest first, each with who asked."""
        rows = self._conn.execute(
            select(exclusions).where(exclusions.c.user_uid == user).order_by(exclusions.c.id)
        )
        return [(_exclusion(row), row.by) for row in rows]

    @_translated
    def add_exclusion(self, user: str, exclusion: Exclusion, by: str) -> None:
        self._conn.execute(
            insert(exclusions),
            [
                {
                    "user_uid": user,
                    "starts_at": exclusion.starts_at,
                    "until": exclusion.until,
                    "reason": exclusion.reason,
                    "by": by,
                }
            ],
        )

    @_translated
    def lift_exclusions(self, user: str) -> int:
        """End ``user``'s exclusions in force now; how many there were."""
        now = self.clock()
        active = and_(
            exclusions.c.user_uid == user,
            exclusions.c.starts_at <= now,
            or_(exclusions.c.until.is_(None), exclusions.c.until > now),
        )
        result = self._conn.execute(update(exclusions).where(active).values(until=now))
        return int(result.rowcount or 0)

    @_translated
    def activity(self, user: str) -> dict[str, list[Activity]]:
        """``user``'s activity of the longest window, per currency (for reports)."""
        now = self.clock()
        query = select(limit_activity).where(
            limit_activity.c.user_uid == user, limit_activity.c.at > now - LONGEST
        )
        found: dict[str, list[Activity]] = {}
        for row in self._conn.execute(query):
            found.setdefault(row.currency, []).append(
                Activity(utc_at(row.at), row.deposit, row.stake, row.returned)
            )
        return found

    @_translated
    def prune(self, batch: int) -> int:
        """Delete up to ``batch`` activity rows older than the longest window; how many."""
        cutoff = self.clock() - LONGEST
        oldest = (
            select(limit_activity.c.id)
            .where(limit_activity.c.at <= cutoff)
            .order_by(limit_activity.c.at)
            .limit(batch)
        )
        result = self._conn.execute(delete(limit_activity).where(limit_activity.c.id.in_(oldest)))
        return int(result.rowcount or 0)

    @_translated
    def count_activity(self) -> int:
        query = select(func.count()).select_from(limit_activity)
        return int(self._conn.execute(query).scalar_one())


# Written with "?" placeholders, swapped for the driver's own (:func:`_marks`).
_ACTIVITY = (
    "SELECT user_uid, currency, at, deposit, stake, returned FROM limit_activity "
    "WHERE user_uid IN (?) AND at > ?"
)
_LIMITED = "SELECT user_uid FROM limited_users WHERE user_uid IN (?)"
_SET_RETURNS = (
    "INSERT INTO limit_activity (user_uid, currency, at, deposit, stake, returned) "
    "SELECT l.user_uid, p.currency, ?, 0, 0, p.amount "
    "FROM limited_users l JOIN postings p ON p.account = 'user:' || l.user_uid AND p.id > ? "
    "JOIN transactions t ON t.id = p.txn_id "
    "WHERE t.idempotency_key LIKE ? ESCAPE '\\' AND p.amount > 0"
)


def _marks(connection: Connection, sql: str) -> str:
    """``sql`` with the driver's placeholder: qmark on sqlite3, format on psycopg."""
    return sql if connection.dialect.paramstyle == "qmark" else sql.replace("?", "%s")


def _moment_reader(connection: Connection) -> Callable[[Any], datetime]:
    """How a raw timestamp reads back: SQLite's text (UTC, no zone), Postgres' datetime."""
    if connection.dialect.paramstyle == "qmark":
        return _sqlite_moment
    return utc_at


def _sqlite_moment(value: Any) -> datetime:
    if isinstance(value, datetime):
        return utc_at(value)
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def utc(moment: datetime | None) -> datetime | None:
    """A stored timestamp in UTC: SQLite hands them back naive, and they were written in UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def utc_at(moment: datetime) -> datetime:
    found = utc(moment)
    assert found is not None
    return found


def _limit(row: Any) -> Limit:
    return Limit(row.kind, row.period, row.currency, row.amount, row.pending, utc(row.pending_at))


def _exclusion(row: Any) -> Exclusion:
    return Exclusion(utc_at(row.starts_at), utc(row.until), row.reason)


def _like_prefix(key: str) -> str:
    """``key:`` followed by anything, as a LIKE pattern (references hold no wildcards, but
    escape them all the same)."""
    escaped = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}:%"
