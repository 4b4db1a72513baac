"""The SQLite store: the embedded, zero-set-up default.

Durability is not traded for speed: WAL with ``synchronous=FULL`` fsyncs every commit. Writers
take the database lock up front with ``BEGIN IMMEDIATE`` so that two writers never both read and
then collide on upgrade (which SQLite would fail with ``SQLITE_BUSY`` instead of waiting), and a
busy timeout makes a writer wait for the lock rather than fail.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event, func
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.sql import ColumnElement

from ..errors import (
    InsufficientFunds,
    LedgerError,
    StoreBusy,
    StoreUnavailable,
    UnbalancedTransaction,
)
from .base import Retry
from .queries import BET_SELECT
from .sql import SqlStore

__all__ = ["SqliteDialect", "SqliteStore"]


class SqliteStore(SqlStore):
    """A ledger in one SQLite file; upgrades its own schema on first use."""

    single_writer = True

    def __init__(self, url: str, *, busy_timeout: float = 10.0, migrate: bool = True) -> None:
        parsed = make_url(url)
        if not parsed.database or parsed.database == ":memory:":
            raise ValueError("the SQLite store needs a file: sqlite:///path/to/ledger.db")
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout = busy_timeout
        engine = create_engine(
            url,
            connect_args={"timeout": busy_timeout, "check_same_thread": False},
            pool_size=8,
            max_overflow=16,
        )
        event.listen(engine, "connect", self._on_connect)
        event.listen(engine, "begin", self._on_begin)
        super().__init__(url, engine, SqliteDialect(engine))
        if migrate:
            self.migrate()

    def _on_connect(self, dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Take transactions out of the sqlite3 module's hands so that we can say BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @staticmethod
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get("ledger_begin", "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")


class SqliteDialect:
    """The :class:`~ledger.stores.dialect.Dialect` of SQLite (the standard ``sqlite3``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def connect(self, *, write: bool) -> Connection:
        connection = self._engine.connect()
        connection.execution_options(ledger_begin="IMMEDIATE" if write else "DEFERRED")
        connection.begin()
        return connection

    def allocate_transaction_ids(self, connection: Connection, count: int) -> list[int]:
        # Safe without a sequence: BEGIN IMMEDIATE makes this the only writer until commit.
        # A bare max() (no coalesce around it) is answered from the end of the primary key.
        last = connection.exec_driver_sql("SELECT max(id) FROM transactions").scalar()
        start = int(last or 0) + 1
        return list(range(start, start + count))

    def timestamp(self, moment: datetime) -> Any:
        # The text form SQLAlchemy's SQLite DateTime type reads back (UTC, no zone suffix).
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")

    def insert_rows(
        self,
        connection: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        *,
        ignore_conflicts: bool = False,
    ) -> None:
        if not rows:
            return
        verb = "INSERT OR IGNORE" if ignore_conflicts else "INSERT"
        marks = ", ".join("?" for _ in columns)
        sql = f"{verb} INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"
        connection.exec_driver_sql(sql, list(rows))

    def debit_balances(self, connection: Connection, rows: Sequence[tuple[int, str, str]]) -> int:
        if not rows:
            return 0
        result = connection.exec_driver_sql(
            "UPDATE accounts SET balance = balance + ? "
            "WHERE name = ? AND currency = ? AND balance + ?1 >= 0",
            list(rows),
        )
        return int(result.rowcount)

    def upsert_balances(
        self, connection: Connection, rows: Sequence[tuple[str, str, str, int]]
    ) -> None:
        if rows:
            connection.exec_driver_sql(
                "INSERT INTO accounts (name, currency, kind, balance) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (name, currency) DO UPDATE SET balance = balance + excluded.balance",
                list(rows),
            )

    def close_bet_rows(self, connection: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
        result = connection.exec_driver_sql(
            "UPDATE bets SET state = ?, payout = ?, payout_currency = ?, closed_at = ? "
            "WHERE uid = ? AND state = 'placed'",
            list(rows),
        )
        return int(result.rowcount)

    def select_bets(self, connection: Connection, uids: Sequence[int]) -> Iterator[Any]:
        # One JSON array per query instead of an IN list: no parameter limit, one statement
        # for a hundred thousand bets.
        sql = f"SELECT {BET_SELECT} FROM bets WHERE uid IN (SELECT value FROM json_each(?))"  # noqa: S608
        for start in range(0, len(uids), 100_000):
            chunk = json.dumps(list(uids[start : start + 100_000]))
            yield from connection.exec_driver_sql(sql, (chunk,)).fetchall()

    def exact_sum(self, expression: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.sum(expression)

    def translate(self, error: SQLAlchemyError) -> LedgerError:
        message = str(getattr(error, "orig", error))
        if isinstance(error, IntegrityError):
            if "UNIQUE constraint failed" in message:
                return Retry(f"a concurrent writer recorded the same key: {message}")
            if "accounts_no_overdraft" in message:
                return InsufficientFunds("a user balance would go below zero")
            if "unbalanced" in message or "sealed" in message:
                return UnbalancedTransaction(message)
            return LedgerError(f"integrity error: {message}", key="store.integrity")
        if isinstance(error, OperationalError):
            if "locked" in message or "busy" in message:
                return StoreBusy(f"the database stayed locked: {message}")
            return StoreUnavailable(f"the database failed: {message}")
        return StoreUnavailable(f"the database failed: {message}")
