"""Responsible-gambling limits in SQL: the unit of work's :class:`SqlLimits` (its ``limits``).

Invariant: a deposit or a Place Bet of a user without a ``limited_users`` row costs one
primary-key probe (one statement for the whole group of requests, no row locked); for a limited
user, the check reads its limits, exclusions and what each limited window holds (hourly sums and
the movements of one hour per window, :mod:`ledger.stores.limit_hours`) after locking its
``limited_users`` row (``FOR UPDATE`` on Postgres, SQLite's writer holding the database), and
the activity it admits is written before that lock ends: two writers can never both see room
that only one of them may use. A change of limit or
an exclusion takes the same row's lock. Proved by ``tests/service/test_limits_machine.py`` and
``tests/stores/test_limits_concurrency.py``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, and_, delete, insert, or_, select, tuple_, update

from ..domain.accounts import user_account
from ..domain.journal import TxnKind
from ..domain.limit_gate import Gate, UserState
from ..domain.limits import PERIODS, Activity, Exclusion, Limit, Period, Use
from .dialect import Dialect
from .limit_hours import ADD_HOURS, ADD_SET_RETURNS, HOUR, SET_CREDITS, hour_of, window_use
from .limit_tables import (
    exclusions,
    limit_activity,
    limit_changes,
    limit_hours,
    limits,
)
from .schema import from_stored, postings, to_stored, transactions

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
        return Gate(self._states(found, now), now, self._window)

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
            self._add_hours(rows)
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
            self._add_hours(rows)

    @_translated
    def record_set_returns(self, key: str, after_posting: int) -> None:
        """After a set-based close written under transactions ``key:<n>``: its credits to the
        available accounts of limited users, in one INSERT ... SELECT joined to them."""
        now, pattern = self.clock(), _like_prefix(key)
        self._dialect.run(
            self._conn,
            _marks(self._conn, _SET_RETURNS),
            (self._dialect.timestamp(now), after_posting, pattern),
        )
        sqlite = self._conn.dialect.paramstyle == "qmark"
        sql = ADD_SET_RETURNS.format(
            add="ledger_add" if sqlite else "numeric_add", sum="ledger_sum" if sqlite else "sum"
        )
        hour = self._dialect.timestamp(hour_of(now))
        self._dialect.run(self._conn, _marks(self._conn, sql), (hour, after_posting, pattern))

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
        # Only the windows some limit is for (an exclusion alone reads no activity).
        wanted: dict[tuple[str, str], set[Period]] = {}
        for user, found in found_limits.items():
            for item in found:
                wanted.setdefault((user, item.currency), set()).add(item.period)
        use = self._uses(wanted, now)
        return {
            user: UserState(
                tuple(found_limits[user]),
                tuple(found_exclusions[user]),
                {currency: use[(who, currency)] for who, currency in use if who == user},
            )
            for user in users
        }

    def _uses(
        self, wanted: Mapping[tuple[str, str], Collection[Period]], now: datetime
    ) -> dict[tuple[str, str], dict[Period, Use]]:
        """What the windows ``wanted`` per user and currency hold at ``now``, in one statement:
        the hourly sums since the longest cut, and the movements of each cut's hour."""
        if not wanted:
            return {}
        conn, stamp = self._conn, self._dialect.timestamp
        parts: list[str] = []
        parameters: list[Any] = []
        for (user, currency), periods in sorted(wanted.items()):
            longest = max(PERIODS[period] for period in periods)
            parts.append(_HOURS)
            parameters += [user, currency, stamp(now - longest)]
            for period in sorted(periods):
                cut = now - PERIODS[period]
                parts.append(_EDGE)
                parameters += [user, currency, stamp(cut), stamp(hour_of(cut) + HOUR)]
        sql = _marks(conn, " UNION ALL ".join(parts))
        moment = _moment_reader(conn)
        hours: dict[tuple[str, str], list[tuple[datetime, int, int, int]]] = {}
        edges: dict[tuple[str, str], list[tuple[datetime, int, int, int]]] = {}
        # Plain SQL, values converted here: SQLAlchemy's processing cost 14 us a row.
        for edge, user, currency, at, deposit, stake, returned in self._dialect.run(
            conn, sql, parameters
        ).fetchall():
            rows = edges if edge else hours
            rows.setdefault((user, currency), []).append(
                (moment(at), from_stored(deposit), from_stored(stake), from_stored(returned))
            )
        return {
            key: window_use(hours.get(key, ()), edges.get(key, ()), now, periods)
            for key, periods in wanted.items()
        }

    def _window(self, user: str, currency: str, since: datetime) -> list[Activity]:
        """The movements of ``user`` in ``currency`` after ``since``: read only to say when a
        refused request would fit."""
        conn = self._conn
        rows = self._dialect.run(
            conn, _marks(conn, _WINDOW), (user, currency, self._dialect.timestamp(since))
        ).fetchall()
        moment = _moment_reader(conn)
        return [
            Activity(moment(at), from_stored(deposit), from_stored(stake), from_stored(returned))
            for at, deposit, stake, returned in rows
        ]

    def _add_hours(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add movements (rows of ``limit_activity``) to their hours' sums."""
        sums: dict[tuple[str, str, datetime], Use] = {}
        for row in rows:
            key = (row["user_uid"], row["currency"], hour_of(row["at"]))
            sums[key] = sums.get(key, Use()).plus(
                Use(row["deposit"], row["stake"], row["returned"])
            )
        sqlite = self._conn.dialect.paramstyle == "qmark"
        sql = _marks(self._conn, ADD_HOURS.format(add="ledger_add" if sqlite else "numeric_add"))
        stamp = self._dialect.timestamp
        for (user, currency, hour), use in sorted(sums.items()):
            self._dialect.run(
                self._conn,
                sql,
                (user, currency, stamp(hour), *(to_stored(value) for value in use)),
            )

    # --- changing ----------------------------------------------------------------------------

    @_translated
    def mark_limited(self, user: str) -> None:
        """Make ``user`` a limited user, and lock its limit state (first, like every writer).
        A user limited for the first time brings the movements of its last 30 days from the
        journal: a limit set today counts what the user deposited, staked and got back
        yesterday, as the player and the regulator read a window."""
        now = self.clock()
        conn = self._conn
        inserted = self._dialect.run(
            conn, _marks(conn, _MARK_LIMITED), (user, self._dialect.timestamp(now))
        ).fetchall()
        self._lock([user])
        if inserted:
            self._from_journal(user, now)

    def _from_journal(self, user: str, now: datetime) -> None:
        """Record ``user``'s movements of the longest window from the journal (once)."""
        query = (
            select(postings.c.currency, transactions.c.created_at, transactions.c.kind,
                   postings.c.amount)
            .join(transactions, transactions.c.id == postings.c.txn_id)
            .where(
                postings.c.account == user_account(user),
                transactions.c.created_at > now - LONGEST,
                transactions.c.created_at <= now,
            )
        )  # fmt: skip
        rows = []
        for currency, created_at, kind, amount in self._conn.execute(query):
            deposit = amount if kind == TxnKind.DEPOSIT and amount > 0 else 0
            stake = -amount if kind == TxnKind.HOLD and amount < 0 else 0
            returned = amount if kind in _RETURNS and amount > 0 else 0
            if deposit or stake or returned:
                rows.append(
                    {"user_uid": user, "currency": currency, "at": utc_at(created_at),
                     "deposit": deposit, "stake": stake, "returned": returned}
                )  # fmt: skip
        if rows:
            self._conn.execute(insert(limit_activity), rows)
            self._add_hours(rows)

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
    def use(self, user: str, currencies: Collection[str]) -> dict[str, dict[Period, Use]]:
        """What each window of ``user`` holds now in each of ``currencies``."""
        use = self._uses({(user, currency): list(PERIODS) for currency in currencies}, self.clock())
        return {currency: found for (_, currency), found in use.items()}

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
        # The hours that start at or before the cut: no window reads them whole again.
        hours = (
            select(limit_hours.c.user_uid, limit_hours.c.currency, limit_hours.c.hour)
            .where(limit_hours.c.hour <= cutoff)
            .limit(batch)
        )
        gone = self._conn.execute(
            delete(limit_hours).where(
                tuple_(limit_hours.c.user_uid, limit_hours.c.currency, limit_hours.c.hour).in_(
                    hours
                )
            )
        )
        return int(result.rowcount or 0) + int(gone.rowcount or 0)


# Written with "?" placeholders, swapped for the driver's own (:func:`_marks`).
_HOURS = (
    "SELECT 0, user_uid, currency, hour, deposit, stake, returned FROM limit_hours "
    "WHERE user_uid = ? AND currency = ? AND hour > ?"
)
_EDGE = (
    "SELECT 1, user_uid, currency, at, deposit, stake, returned FROM limit_activity "
    "WHERE user_uid = ? AND currency = ? AND at > ? AND at < ?"
)
_WINDOW = (
    "SELECT at, deposit, stake, returned FROM limit_activity "
    "WHERE user_uid = ? AND currency = ? AND at > ?"
)
_MARK_LIMITED = (
    "INSERT INTO limited_users (user_uid, since) VALUES (?, ?) "
    "ON CONFLICT (user_uid) DO NOTHING RETURNING user_uid"
)
_RETURNS = (TxnKind.REFUND, TxnKind.SETTLE)
_LIMITED = "SELECT user_uid FROM limited_users WHERE user_uid IN (?)"
_SET_RETURNS = (
    "INSERT INTO limit_activity (user_uid, currency, at, deposit, stake, returned) "
    "SELECT l.user_uid, p.currency, ?, 0, 0, p.amount " + SET_CREDITS
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
