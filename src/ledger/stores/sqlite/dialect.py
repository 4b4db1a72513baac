"""SQLite's :class:`~ledger.stores.dialect.Dialect`: its SQL variants and bulk I/O, balances
added in Python under the single writer's lock (amounts beyond 64 bits are exact decimal text)."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Engine, Table, func
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
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
from .. import events as feed
from ..base import Retry
from ..dialect import BalanceMemo
from ..queries import BET_SELECT
from ..schema import CAPACITY, INT64_MAX, Amount, to_stored
from .balances import balances
from .bulk import largest_statement, multi_row_chunks, multi_row_insert, streamed_batches
from .checkpointer import AUTOCHECKPOINT_PAGES, Checkpointer
from .driver import driver, run
from .writer_lock import WriterLock

log = logging.getLogger("ledger.stores.sqlite")


class SqliteDialect:
    """The :class:`~ledger.stores.dialect.Dialect` of SQLite (the standard ``sqlite3``)."""

    def __init__(
        self,
        engine: Engine,
        checkpointer: Checkpointer,
        lock: WriterLock | None = None,
    ) -> None:
        self._engine = engine
        self._lock = lock
        self._checkpointer = checkpointer
        # Each open writing connection (by identity: a closed Connection no longer reaches
        # its DBAPI connection's info): the writer lock's descriptor, and whether it is bulk.
        self._writes: dict[int, tuple[int | None, bool]] = {}

    def connect(self, *, write: bool, bulk: bool = False) -> Connection:
        held = self._lock.acquire() if write and self._lock is not None else None
        try:
            connection = self._engine.connect()
            try:
                connection.execution_options(
                    ledger_begin="IMMEDIATE" if write else "DEFERRED",
                    # A write's statement journals in memory. A multi-row INSERT into a table
                    # with triggers or a unique index journals the pages it changes that were
                    # already in the transaction, and past 64 KiB SQLite spills that to a
                    # temporary file it creates, writes and deletes: Place Bets of 1,000
                    # entries wrote 1.8 times a bet there, 4 us a bet of the writer's CPU.
                    # Not for a bulk unit (a huge close's staging tables, sorts and statement
                    # journals of a million rows: 1,939 MiB at its peak against 1,225), nor
                    # for reads (the operator's large sorts).
                    ledger_temp="MEMORY" if write and not bulk else "DEFAULT",
                )
                connection.begin()
                if write and bulk:
                    # A huge close's commit leaves hundreds of megabytes of log; with the
                    # automatic checkpoint it copied them into the database before it returned:
                    # 1.76 -> 0.91 s of commit at a million (benchmarks/settle_split.py). The
                    # copy starts beside the caller after it (release). Durability is the log's,
                    # synced at commit either way.
                    run(connection, "PRAGMA wal_autocheckpoint=0")
            except BaseException:
                connection.close()
                raise
        except BaseException:
            if held is not None:
                os.close(held)
            raise
        if write:
            self._writes[id(connection)] = (held, bulk)
        return connection

    def run(self, connection: Connection, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return run(connection, sql, parameters)

    def release(self, connection: Connection, *, committed: bool) -> None:
        held, bulk = self._writes.pop(id(connection), (None, None))
        try:
            if bulk:
                self._resume_checkpoints(connection, committed)
            elif bulk is not None and committed:
                self._after_commit(connection)
        finally:
            with contextlib.suppress(SQLAlchemyError):
                connection.close()
            if held is not None:
                os.close(held)  # closing the descriptor drops its flock

    def _resume_checkpoints(self, connection: Connection, committed: bool) -> None:
        """After a bulk unit of work: automatic checkpoints as before, and (committed) the copy
        of its log started by the checkpointer's thread."""
        try:
            run(connection, f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
        except SQLAlchemyError:
            # Never back in the pool still deferring, or its commits would never copy the log.
            connection.invalidate()
        if committed:
            self._checkpointer.request()

    def _after_commit(self, connection: Connection) -> None:
        """A write committed on ``connection``, its writer lock still held: the copy of the log
        into the database is the checkpointer thread's, and may be finished here."""
        if self._checkpointer.caught_up():
            # The checkpointer's pass copied the log as it was when the pass began; this copies
            # what was written since (a few commits' pages), under the writer lock still held,
            # so that the next writer finds the whole log in the database and starts it over.
            # After the commit: a failure here loses nothing, and must not fail the write.
            try:
                run(connection, "PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except SQLAlchemyError as error:
                log.warning("a checkpoint after a commit failed (the next one copies): %s", error)
        self._checkpointer.request()

    def allocate_transaction_ids(self, connection: Connection, count: int) -> list[int]:
        return _next_ids(connection, "transactions", count)

    def allocate_delivery_ids(self, connection: Connection, count: int) -> list[int]:
        return _next_ids(connection, "deliveries", count)

    def check_deferred(self, connection: Connection) -> None:
        # One writer at a time: the counter's row blocks nobody, whenever checks run.
        return None

    def send_queued(self, connection: Connection) -> None:
        # Every statement is executed when issued: nothing waits.
        return None

    def allocate_event_group(self, connection: Connection) -> int:
        # Safe without a sequence, like _next_ids: this is the only writer until commit.
        # The chain's groups too: pruning may take the newest group's events, never its record.
        last = run(
            connection,
            "SELECT max(g) FROM (SELECT max(grp) AS g FROM event_commits "
            "UNION ALL SELECT max(grp) FROM journal_chain)",
        ).fetchone()[0]
        return int(last or 0) + 1

    def seal_events(self, connection: Connection, grp: int, count: int, at: datetime) -> None:
        feed.seal_in_steps(connection, self, grp, count, at)

    def commit_content(self, connection: Connection, grp: int) -> Content | None:
        # The driver's own cursor: a group commit's rows without SQLAlchemy's execution.
        queries = chain.plain_queries(connection.dialect)
        return chain.content_of_pages(
            (tag, chain.driver_pages(run(connection, sql, (grp,)))) for tag, sql in queries
        )

    def seal_chain(
        self, connection: Connection, grp: int, content: Content | None, at: datetime
    ) -> None:
        if content is not None and content.rows:
            chain.seal_plain(connection, self, grp, content, at)

    def timestamp(self, moment: datetime) -> Any:
        # The text form SQLAlchemy's SQLite DateTime type reads back (UTC, no zone suffix): the
        # wall clock to the microsecond, as isoformat spells it up to its offset. Half the CPU
        # of strftime (0.9 against 1.9 us), which a group commit paid once per journalled
        # delivery. strftime writes a year before 1000 without its leading zeros: its text there.
        if moment.year < 1000:
            return moment.strftime("%Y-%m-%d %H:%M:%S.%f")
        return moment.isoformat(" ", "microseconds")[:26]

    set_based_up_to = None  # measured from 1,000 to 1,000,000 items (docs/performance.md)

    # SQLite spells IS DISTINCT FROM only since 3.39; IS NOT is the same test on every version.
    distinct_from = "IS NOT"

    def minute(self, timestamp: str) -> str:
        # The stored text (see timestamp()) up to the minute: "YYYY-MM-DD HH:MM".
        return f"substr({timestamp}, 1, 16)"

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
        # Multi-row INSERTs (up to MULTI_ROW rows each), not one statement per row: a table
        # with an INSERT trigger that may abort (postings_sealed, transactions_balanced) makes
        # SQLite open a statement journal for every statement, and inside a savepoint (every
        # command of a group commit runs in one) each statement copies the index pages it
        # touches there again. Row by row, the postings of 1,000 bets cost 20 us a bet of the
        # writer's CPU, a group of one-bet Place Bets 34 us a bet; in statements of 512 rows,
        # 7.7 and 15 (benchmarks/write_path_cpu.py: 43 to 32 ms per 1,000 batched bets).
        if not rows:
            return
        rows = _stored_rows(rows, _money_columns(table, tuple(columns)))
        verb = "INSERT OR IGNORE" if ignore_conflicts else "INSERT"
        head = f"{verb} INTO {table.name} ({', '.join(columns)})"
        largest = largest_statement(driver(connection), len(columns))
        for size, chunks in multi_row_chunks(rows, largest):
            sql = multi_row_insert(head, len(columns), size, upsert)
            run(connection, sql, chunks, many=True)

    def debit_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[int, str, str]],
        memo: BalanceMemo | None = None,
    ) -> int:
        if not rows:
            return 0
        current = balances(connection, [(name, currency) for _, name, currency in rows], memo)
        applied = []
        for delta, name, currency in rows:
            balance = current.get((name, currency))
            # A debit never grows a balance's magnitude: only the floor at zero can refuse it.
            if balance is not None and balance + delta >= 0:
                applied.append((balance + delta, name, currency))
        if applied:
            run(
                connection,
                "UPDATE accounts SET balance = ? WHERE name = ? AND currency = ?",
                [(to_stored(balance), name, currency) for balance, name, currency in applied],
                many=True,
            )
            if memo is not None:
                memo.update(((name, currency), balance) for balance, name, currency in applied)
        return len(applied)

    def upsert_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[str, str, str, int]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        if not rows:
            return {}
        after: dict[tuple[str, str], int] = {}
        current = balances(connection, [(name, currency) for name, currency, _, _ in rows], memo)
        written = []
        for name, currency, kind, delta in rows:
            balance = current.get((name, currency), 0) + delta
            if not -CAPACITY <= balance <= CAPACITY:
                # Before anything of the unit of work's post() is written.
                raise CapacityExceeded(_too_large(name, currency))
            after[(name, currency)] = balance
            written.append((name, currency, kind, to_stored(balance)))
        run(
            connection,
            "INSERT INTO accounts (name, currency, kind, balance) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name, currency) DO UPDATE SET balance = excluded.balance",
            written,
            many=True,
        )
        if memo is not None:
            memo.update(after)
        return after

    def read_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        return balances(connection, keys, memo)

    def lock_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        # BEGIN IMMEDIATE already made this the only writer: a plain read is locked enough.
        return balances(connection, keys, memo)

    def bets_and_balances(
        self,
        connection: Connection,
        uids: Sequence[int],
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
        users: Sequence[str] = (),
        probe: dict[str, list[str]] | None = None,
    ) -> tuple[list[Any], dict[tuple[str, str], int]]:
        # BEGIN IMMEDIATE already made this the only writer: plain reads, remembered. The
        # limits' probe is its own statement (no round trip to save).
        return list(self.select_bets(connection, uids)), balances(connection, keys, memo)

    def close_bet_rows(self, connection: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
        result = run(
            connection,
            "UPDATE bets SET state = ?, payout = ?, payout_currency = ?, closed_at = ?, "
            "closed_grp = ? WHERE uid = ? AND state = 'placed'",
            _stored_rows(rows, [1]),
            many=True,
        )
        changed = int(result.rowcount)
        uids = [(row[-1],) for row in rows]
        run(connection, "DELETE FROM open_bets WHERE uid = ?", uids, many=True)
        return changed

    def select_bets(self, connection: Connection, uids: Sequence[int]) -> Iterator[Any]:
        # One JSON array per query instead of an IN list: no parameter limit, one statement
        # for a hundred thousand bets.
        sql = f"SELECT {BET_SELECT} FROM bets WHERE uid IN (SELECT value FROM json_each(?))"  # noqa: S608
        for start in range(0, len(uids), 100_000):
            chunk = json.dumps(list(uids[start : start + 100_000]))
            yield from run(connection, sql, (chunk,)).fetchall()

    def temp_table(
        self, connection: Connection, name: str, columns: Sequence[tuple[str, str]]
    ) -> None:
        # No declared type for amounts (BLOB affinity): wide text and integers stay as they are.
        types = {"key": "INTEGER PRIMARY KEY", "int": "INTEGER", "text": "TEXT", "amount": ""}
        body = ", ".join(f"{column} {types[kind]}" for column, kind in columns)
        run(connection, f"CREATE TEMP TABLE {name} ({body})")

    def stage(
        self,
        connection: Connection,
        name: str,
        columns: Sequence[tuple[str, str]],
        rows: Iterable[tuple[Any, ...]],
        filled: int | None = None,
    ) -> None:
        self.temp_table(connection, name, columns)
        given = columns[:filled]
        head = f"INSERT INTO {name} ({', '.join(column for column, _ in given)})"
        # Multi-row statements, as the rows stream: a million items of twelve columns took 4.1 s
        # of CPU one row a statement and take 3.3 s 512 rows a statement (one step of the
        # statement, not one per row; the binding is the same), the statement measured alone.
        width = len(given)
        rest: list[tuple[Any, ...]] = []
        largest = largest_statement(driver(connection), width)
        batches = streamed_batches(rows, largest, rest)
        run(connection, multi_row_insert(head, width, largest, None), batches, many=True)
        for size, parameters in multi_row_chunks(rest, largest):
            run(connection, multi_row_insert(head, width, size, None), parameters, many=True)

    def analyze(self, connection: Connection, names: Sequence[str]) -> None:
        # SQLite's planner does well with the primary keys alone.
        return None

    def latest_per(self, table: str, key: str, columns: Sequence[str], order: str) -> str:
        # SQLite takes a bare column of an aggregate query with max() from the row holding
        # that max: one pass, no sort beyond the grouping's.
        names = ", ".join(columns)
        return (
            f"SELECT {key}, {names} FROM "  # noqa: S608 - names from the caller's code
            f"(SELECT {key}, {names}, max({order}) FROM {table} GROUP BY {key})"
        )

    def bet_currencies(self, connection: Connection, uids: Sequence[int]) -> set[str]:
        sql = "SELECT DISTINCT currency FROM bets WHERE uid IN (SELECT value FROM json_each(?))"
        found: set[str] = set()
        for start in range(0, len(uids), 100_000):
            chunk = json.dumps(list(uids[start : start + 100_000]))
            found.update(row[0] for row in run(connection, sql, (chunk,)))
        return found

    def exact_sum(self, expression: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.ledger_sum(expression, type_=Amount())

    def translate(self, error: SQLAlchemyError) -> LedgerError:
        message = str(getattr(error, "orig", error))
        if isinstance(error, IntegrityError):
            if "UNIQUE constraint failed" in message:
                return Retry(f"a concurrent writer recorded the same key: {message}")
            if "accounts_no_overdraft" in message:
                return InsufficientFunds("a user balance would go below zero")
            if "_exact" in message:
                # A value that is not an exact integer of at most 38 digits reached a money
                # column: the checks in Python come first, so only a bug or a hand gets here.
                return CapacityExceeded(f"a value the store cannot hold exactly: {message}")
            if "unbalanced" in message or "sealed" in message:
                return UnbalancedTransaction(message)
            return LedgerError(f"integrity error: {message}", key="store.integrity")
        if isinstance(error, OperationalError):
            if "locked" in message or "busy" in message:
                return StoreBusy(f"the database stayed locked: {message}")
            return StoreUnavailable(f"the database failed: {message}")
        return StoreUnavailable(f"the database failed: {message}")


def _too_large(name: str, currency: str) -> str:
    return f"account {name} {currency} would exceed the {len(str(CAPACITY))} digits a store holds"


def _stored_rows(
    rows: Sequence[tuple[Any, ...]], money: Sequence[int]
) -> Sequence[tuple[Any, ...]]:
    """``rows`` with every amount beyond 64 bits in its text form (the driver refuses such ints).

    Almost every batch has none: one pass per money column in C (map, filter, max) to find out,
    and the rows are copied only if needed. (-2^63 counts as wide here; to_stored keeps it.)
    """
    wide = [
        n
        for n in money
        if max(map(abs, filter(None, map(itemgetter(n), rows))), default=0) > INT64_MAX
    ]
    if not wide:
        return rows
    return [
        tuple(
            to_stored(value) if n in wide and value is not None else value
            for n, value in enumerate(row)
        )
        for row in rows
    ]


@functools.cache
def _money_columns(table: Table, columns: tuple[str, ...]) -> list[int]:
    """Where among ``columns`` the amounts are (looked up once per statement shape)."""
    return [n for n, name in enumerate(columns) if isinstance(table.c[name].type, Amount)]


def _next_ids(connection: Connection, table: str, count: int) -> list[int]:
    # Safe without a sequence: BEGIN IMMEDIATE makes this the only writer until commit.
    # A bare max() (no coalesce around it) is answered from the end of the primary key.
    last = run(connection, f"SELECT max(id) FROM {table}").fetchone()[0]  # noqa: S608
    start = int(last or 0) + 1
    return list(range(start, start + count))
