"""Postgres's :class:`~ledger.stores.dialect.Dialect`: its SQL variants, bulk I/O and errors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import (
    JSON,
    Connection,
    Engine,
    Table,
    event,
    func,
)
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.sql import ColumnElement

from ...errors import (
    CapacityExceeded,
    InsufficientFunds,
    LedgerError,
    StoreBusy,
    StoreUnavailable,
    UnbalancedTransaction,
)
from ...integrity.canonical import Content
from .. import chain
from ..base import Retry
from ..dialect import BalanceMemo, remembered
from . import pipeline, temp_buffers
from .arrays import ARRAYS, BULK_ROWS, Array, Bigints, array_type
from .content import stage_content
from .ids import IdBlock
from .locked import (
    ACCOUNTS,
    BALANCES,
    BETS,
    DELTAS,
    KEYS,
    LOCKING,
    SEAL,
    _balances,
    _columns,
    _knows,
    credit_locked,
    debit_locked,
)
from .pipeline import (
    DEFERRED_ROWS,
    _send_queued,
    commit_queued,
    defer,
    drop_on_checkin,
    drop_queued,
    run_many,
)
from .pool import fresh, pinger

CLOSE_STATISTICS = 10  # default_statistics_target while a set-based close runs (see stage)


CLOSE_WORK_MEM = "256MB"  # per sort or hash of a set-based close (see PostgresDialect.stage)


# The column types of a set-based close's temporary tables (ledger.stores.closing's kinds).
_TEMP_TYPES = {"key": "bigint", "int": "bigint", "text": "text", "amount": "numeric"}


RETRY_STATES = {"23505", "40001", "40P01"}  # unique violation, serialization, deadlock


BUSY_STATES = {"55P03", "57014"}  # lock_timeout, statement_timeout (query canceled)


OUT_OF_RANGE = "22003"  # numeric_value_out_of_range


# The limits' probe (ledger.stores.limit_rows) sent with a Place Bet group's reads.
LIMITED_USERS = (
    "SELECT user_uid FROM limited_users WHERE user_uid = ANY(%s::text[]) "
    "ORDER BY user_uid FOR UPDATE"
)


class PostgresDialect:
    """The :class:`~ledger.stores.dialect.Dialect` of Postgres (psycopg 3)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._ids = {
            name: IdBlock(name) for name in ("transaction_ids", "delivery_ids", "event_groups")
        }
        _listen(engine)

    def connect(self, *, write: bool, bulk: bool = False) -> Connection:
        connection = self._engine.connect()
        connection.begin()
        return connection

    def run(self, connection: Connection, sql: str, parameters: Sequence[Any] = ()) -> Any:
        # With whatever is queued, in one round trip (the counter's update: with SET CONSTRAINTS).
        return pipeline.run(connection, sql, tuple(parameters))

    def release(self, connection: Connection, *, committed: bool) -> None:
        # Postgres locks rows, and its locks end with the transaction; its checkpointer process
        # copies the log, never a commit.
        temp_buffers.release(connection)

    def allocate_transaction_ids(self, connection: Connection, count: int) -> list[int]:
        return self._ids["transaction_ids"].take(connection, count)

    def allocate_delivery_ids(self, connection: Connection, count: int) -> list[int]:
        return self._ids["delivery_ids"].take(connection, count)

    def check_deferred(self, connection: Connection) -> None:
        # The postings' check of their transactions (migration 0017) is deferred to commit: run
        # it before the counter's lock (queued: sent just before the counter's update, which
        # follows at once), so that nothing waits on that lock while it runs.
        defer(connection, "SET CONSTRAINTS ALL IMMEDIATE", None)

    def allocate_event_group(self, connection: Connection) -> int:
        return self._ids["event_groups"].take(connection, 1)[0]

    def seal_events(self, connection: Connection, grp: int, count: int, at: datetime) -> None:
        # One statement, nothing read back: queued, it goes with the COMMIT that follows, one
        # round trip for both (the counter's lock is then held for no more than the commit).
        defer(connection, SEAL, (count, grp, count, at))

    def commit_content(self, connection: Connection, grp: int) -> Content | None:
        # In SQL, queued after the writes and before the seals' locks: a set-based close's
        # million rows never come to Python, and a batch pays no round trip for it.
        stage_content(connection, grp)
        return None

    def seal_chain(
        self, connection: Connection, grp: int, content: Content | None, at: datetime
    ) -> None:
        # Queued with the COMMIT, after the event feed's seal (one round trip for all).
        defer(connection, chain.ONE_STATEMENT, chain.one_statement_parameters(grp, at))

    def send_queued(self, connection: Connection) -> None:
        pipeline.run(connection, None, None)

    def insert_rows(
        self,
        connection: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        *,
        ignore_conflicts: bool = False,
        upsert: str | None = None,
    ) -> None:
        if not rows:
            return
        sql, kinds = _insert_sql(table, tuple(columns), ignore_conflicts, upsert)
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            arrays = _columns(chunk, kinds)
            if len(chunk) <= DEFERRED_ROWS:
                # Nothing reads its outcome: sent with the next statement that needs an answer.
                defer(connection, sql, arrays)
            else:
                pipeline.run(connection, sql, arrays)

    # The memo (ledger.stores.dialect.BalanceMemo) holds, on Postgres, only balances this
    # transaction has locked (lock_balances, bets_and_balances, the upsert's RETURNING) and
    # kept current since: no other writer can change them before commit. When it knows every
    # account a write touches, the write needs no answer from the database and is queued with
    # the next statement that does (one round trip a batch for all of a group's writes);
    # otherwise it is the statement it always was, and the memo forgets what it cannot follow.

    def debit_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[int, str, str]],
        memo: BalanceMemo | None = None,
    ) -> int:
        if rows and _knows(memo, [(name, currency) for _, name, currency in rows]):
            assert memo is not None
            return debit_locked(connection, rows, memo)
        changed = 0
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            result = pipeline.run(
                connection,
                "UPDATE accounts a SET balance = a.balance + v.delta "
                "FROM unnest(%b::numeric[], %b::text[], %b::text[]) AS v(delta, name, currency) "
                "WHERE a.name = v.name AND a.currency = v.currency AND a.balance + v.delta >= 0",
                _columns(chunk, DELTAS),
                lookup=True,
            )
            changed += int(result.rowcount)
        if memo is not None:
            for _, name, currency in rows:
                memo.pop((name, currency), None)
        return changed

    def upsert_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[str, str, str, int]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        if rows and _knows(memo, [(name, currency) for name, currency, _, _ in rows]):
            assert memo is not None
            return credit_locked(connection, rows, memo)
        after: dict[tuple[str, str], int] = {}
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            # RETURNING: the balance this statement left, under the row lock it holds until
            # commit: exact whatever other writers do meanwhile.
            result = pipeline.run(
                connection,
                "INSERT INTO accounts (name, currency, kind, balance) "
                "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::numeric[]) "
                "ON CONFLICT (name, currency) DO UPDATE "
                "SET balance = accounts.balance + excluded.balance "
                "RETURNING name, currency, balance",
                _columns(chunk, ACCOUNTS),
            )
            for name, currency, balance in result.fetchall():
                after[(name, currency)] = int(balance)
        if memo is not None:
            memo.update(after)
        return after

    def read_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        return _balances(connection, keys, "")

    def lock_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        if keys and _knows(memo, keys):
            assert memo is not None
            return remembered(memo, keys)
        # Locked in key order, like every other writer's: no deadlock between two of them.
        found = _balances(connection, keys, LOCKING)
        if memo is not None:
            memo.update((key, found.get(key)) for key in keys)
        return found

    def bets_and_balances(
        self,
        connection: Connection,
        uids: Sequence[int],
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
        users: Sequence[str] = (),
        probe: dict[str, list[str]] | None = None,
    ) -> tuple[list[Any], dict[tuple[str, str], int]]:
        # The accounts locked first, then the bets read. In that order: a statement sees what
        # committed before it began, so a concurrent writer of the same request, whose commit
        # the lock waited for, has its bets seen here and the request is answered as the
        # repeat it is, never refused for the funds the first one spent.
        if len(uids) > BULK_ROWS or len(keys) > BULK_ROWS or not keys:
            balances = self.lock_balances(connection, keys, memo)
            return list(self.select_bets(connection, uids)), balances
        # One round trip, with whatever is queued (and the transaction's BEGIN); with the
        # limits' probe of ``users`` when asked (their rows locked after the accounts).
        statements = [(BALANCES + LOCKING, _columns(keys, KEYS)), (BETS, (Bigints(uids),))]
        if probe is not None and users:
            statements.append((LIMITED_USERS, (list(users),)))
        locked, found, *limited = run_many(connection, statements)
        if limited:
            assert probe is not None
            probe["limited"] = [row[0] for row in limited[0]]
        balances = {(name, currency): int(balance) for name, currency, balance in locked}
        if memo is not None:
            memo.update((key, balances.get(key)) for key in keys)
        return found.fetchall(), balances

    def close_bet_rows(self, connection: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
        changed = 0
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            result = connection.exec_driver_sql(
                "UPDATE bets b SET state = v.state, payout = v.payout, "
                "payout_currency = v.payout_currency, closed_at = v.closed_at, "
                "closed_grp = v.closed_grp "
                "FROM unnest(%s::text[], %s::numeric[], %s::text[], %s::timestamptz[], "
                "%s::bigint[], %s::bigint[]) "
                "AS v(state, payout, payout_currency, closed_at, closed_grp, uid) "
                "WHERE b.uid = v.uid AND b.state = 'placed'",
                _columns(chunk),
            )
            changed += int(result.rowcount)
            defer(
                connection,
                "DELETE FROM open_bets WHERE uid = ANY(%s::bigint[])",
                ([row[-1] for row in chunk],),
            )
        return changed

    def select_bets(self, connection: Connection, uids: Sequence[int]) -> Iterator[Any]:
        for start in range(0, len(uids), BULK_ROWS):
            chunk = list(uids[start : start + BULK_ROWS])
            yield from pipeline.run(connection, BETS, (Bigints(chunk),), lookup=True).fetchall()

    def timestamp(self, moment: datetime) -> Any:
        return moment

    distinct_from = "IS DISTINCT FROM"

    # No bound: the 503 a set-based settle of 1,000,000 once answered was its statement
    # timeout, on a NOT IN that Postgres no longer hashed past work_mem (closing.write now
    # uses an anti-join); the set-based close is the faster path at every size measured.
    set_based_up_to = None

    def minute(self, timestamp: str) -> str:
        return f"date_trunc('minute', {timestamp})"

    def temp_table(
        self, connection: Connection, name: str, columns: Sequence[tuple[str, str]]
    ) -> None:
        # No index, not even on a key: the close joins its analysed temporary tables by hash,
        # and a primary key cost an index insertion per row (a million-item settle: 3.3 s of
        # the server's CPU for close_first alone, 0.6 s without; staging 4.1 s, 1.8 s without).
        # Text compares byte by byte, as the key columns it is joined with (migration 0015):
        # the close's sorts and groupings of a million account names use memcmp, not strcoll.
        body = ", ".join(
            f"{column} {_TEMP_TYPES[kind]}" + (' COLLATE "C"' if kind == "text" else "")
            for column, kind in columns
        )
        connection.exec_driver_sql(f"CREATE TEMP TABLE {name} ({body}) ON COMMIT DROP")

    def stage(
        self,
        connection: Connection,
        name: str,
        columns: Sequence[tuple[str, str]],
        rows: Iterable[tuple[Any, ...]],
        filled: int | None = None,
    ) -> None:
        # For this transaction only: the close's hashes, sorts and windows over every item
        # (and the bets trigger's transition tables) in memory, not in batches spilled to
        # disk as the default 4 MB makes them at a million items.
        connection.exec_driver_sql(f"SET LOCAL work_mem = '{CLOSE_WORK_MEM}'")
        # And their statistics from a sample of 3,000 rows, not 30,000: the planner needs their
        # sizes and that their keys are distinct, which a small sample tells as well. The four
        # ANALYZEs of a 100,000-item settle: 0.18 -> 0.04 s of the server's time (0.43 s at a
        # million), the plans the same (benchmarks/settle_split.py, EXPLAIN).
        connection.exec_driver_sql(f"SET LOCAL default_statistics_target = {CLOSE_STATISTICS}")
        self.temp_table(connection, name, columns)
        # COPY through the driver's own connection: the rows stream in one round trip, without
        # a statement per chunk or Python-side arrays. In the binary format: no integer turned
        # into text and no text scanned for characters to escape, in Python's process, and
        # none parsed back by the server (a million items: the ledger's CPU for staging 1.42
        # and 1.69 s in text, 1.04 and 1.03 s in binary, the server's about the same).
        driver = connection.connection.driver_connection
        assert driver is not None
        pipeline.run(connection, None, None)  # COPY cannot be pipelined: what waits goes first
        staged = columns[:filled]
        names = ", ".join(column for column, _ in staged)
        statement = f"COPY {name} ({names}) FROM STDIN (FORMAT BINARY)"
        items = 0
        try:
            with driver.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types([_TEMP_TYPES[kind] for _, kind in staged])
                for row in rows:
                    copy.write_row(row)
                    items += 1
        except psycopg.Error as error:
            # On the driver's connection, past SQLAlchemy: its errors come out as SQLAlchemy's
            # (as _run's do), so that the store translates them (a lost connection: 503).
            raise DBAPIError.instance(statement, None, error, psycopg.Error) from error
        finally:
            # Whatever the COPY got through (it may fail midway): those pages are the session's.
            temp_buffers.staged(connection, items)

    def analyze(self, connection: Connection, names: Sequence[str]) -> None:
        # Temporary tables have no statistics until analysed: the planner would take a million
        # staged rows for a few hundred and join them with nested loops.
        for name in names:
            connection.exec_driver_sql(f"ANALYZE {name}")

    def latest_per(self, table: str, key: str, columns: Sequence[str], order: str) -> str:
        names = ", ".join(columns)
        return (
            f"SELECT DISTINCT ON ({key}) {key}, {names} FROM {table} "  # noqa: S608 - code's names
            f"ORDER BY {key}, {order} DESC"
        )

    def bet_currencies(self, connection: Connection, uids: Sequence[int]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(uids), BULK_ROWS):
            chunk = list(uids[start : start + BULK_ROWS])
            result = connection.exec_driver_sql(
                "SELECT DISTINCT currency FROM bets WHERE uid = ANY(%s::bigint[])", (chunk,)
            )
            found.update(row[0] for row in result)
        return found

    def exact_sum(self, expression: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.sum(expression)

    def translate(self, error: SQLAlchemyError) -> LedgerError:
        for block in self._ids.values():
            # After a failover, ids drawn from the old primary may not have reached the new one,
            # which could then hand them out again: any database error starts fresh blocks.
            block.forget()
        original = getattr(error, "orig", None)
        state = getattr(original, "sqlstate", None) or ""
        message = str(original or error).strip()
        if state in RETRY_STATES:
            return Retry(f"a concurrent writer got there first: {message}")
        if state == OUT_OF_RANGE or (state == "23514" and "_exact" in message):
            # A balance or a sum past 38 digits (the <table>_<column>_exact CHECKs); the
            # transaction rolls back with nothing written, and the same request would fail the
            # same way again: 422, not a retryable 503.
            return CapacityExceeded(f"beyond the 38 digits the store holds: {message}")
        if state == "23514":
            if "accounts_no_overdraft" in message:
                return InsufficientFunds("a user balance would go below zero")
            return UnbalancedTransaction(message)
        if state in BUSY_STATES:
            return StoreBusy(f"the database did not answer in time: {message}")
        if state.startswith("23"):
            return LedgerError(f"integrity error: {message}", key="store.integrity")
        if isinstance(error, DBAPIError) and not state:
            # No SQLSTATE: the connection itself failed (refused, reset, timed out).
            return StoreUnavailable(f"the database is unreachable: {message}")
        return StoreUnavailable(f"the database failed ({state}): {message}")


_INSERTS: dict[
    tuple[str, tuple[str, ...], bool, str | None], tuple[str, tuple[type[Array], ...]]
] = {}


def _insert_sql(
    table: Table, columns: tuple[str, ...], ignore_conflicts: bool, upsert: str | None
) -> tuple[str, tuple[type[Array], ...]]:
    """One INSERT ... SELECT FROM unnest(arrays): a single statement for tens of thousands of
    rows, whose statement-level triggers fire once; built once per shape, with the array
    class of each column."""
    key = (table.name, columns, ignore_conflicts, upsert)
    found = _INSERTS.get(key)
    if found is None:
        types = [array_type(table.c[name].type) for name in columns]
        arrays = ", ".join(f"%b::{kind}[]" for kind in types)
        values = ", ".join(
            f"v.{name}::json" if isinstance(table.c[name].type, JSON) else f"v.{name}"
            for name in columns
        )
        names = ", ".join(columns)
        conflict = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
        if upsert is not None:
            conflict = f" {upsert}"
        sql = (
            f"INSERT INTO {table.name} ({names}) SELECT {values} "  # noqa: S608
            f"FROM unnest({arrays}) AS v({names}){conflict}"
        )
        found = _INSERTS[key] = (sql, tuple(ARRAYS[kind] for kind in types))
    return found


def _listen(engine: Engine) -> None:
    event.listen(engine, "before_cursor_execute", _send_queued)
    event.listen(engine, "commit", commit_queued)
    event.listen(engine, "rollback", drop_queued)
    event.listen(engine, "rollback_savepoint", drop_queued)
    event.listen(engine.pool, "checkin", drop_on_checkin)
    event.listen(engine.pool, "connect", fresh)
    event.listen(engine.pool, "checkout", pinger(engine))
