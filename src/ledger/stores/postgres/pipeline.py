"""Statements sent together: writes held back and sent with the next statement or the COMMIT,
in one round trip (psycopg's pipeline mode).

Invariant: a held write reaches the server before any later statement of its transaction runs,
and at the latest with the COMMIT; a failure among held writes fails that statement or the
commit, never passes as a success. Tested by tests/stores/test_postgres_batching.py."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from sqlalchemy import (
    Connection,
)
from sqlalchemy.exc import DBAPIError

from .pool import IDLE_SINCE

DEFERRED_ROWS = 1_000  # larger bulk inserts go at once: their arrays are not kept waiting


_PENDING = "ledger.pending"  # the queue, in the pooled connection's info dictionary


# Each queued statement with psycopg's ``prepare`` (False: a lookup, see _run).
_Queue = list[tuple[str, Any, bool | None]]


def _queue(connection: Connection) -> _Queue:
    pending: _Queue = connection.info.setdefault(_PENDING, [])
    return pending


def defer(connection: Connection, sql: str, params: Any, *, lookup: bool = False) -> None:
    _queue(connection).append((sql, params, False if lookup else None))


def run(connection: Connection, sql: str | None, params: Any, *, lookup: bool = False) -> Any:
    """Send the queued statements, then ``sql`` (if any), in one round trip; ``sql``'s cursor.

    A ``lookup`` (rows by key) is planned on every execution, never prepared: a prepared
    statement keeps the generic plan it got while its table was small (a sequential scan)
    until the table's statistics change, and a fresh ledger's tables grow from nothing under
    load; planned with the keys in hand, it reads the primary key's index. Driver errors come
    out as SQLAlchemy's (``DBAPIError``), as from ``exec_driver_sql``.
    """
    prepare = False if lookup else None
    pending = connection.info.get(_PENDING)
    if not pending and sql is None:
        return None
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        cursor = driver.cursor()
        if not pending:
            cursor.execute(sql, params, prepare=prepare)
            return cursor
        with _pipeline(connection, driver, pending):
            if sql is not None:
                cursor.execute(sql, params, prepare=prepare)
        return cursor
    except psycopg.Error as error:
        raise DBAPIError.instance(sql, params, error, psycopg.Error) from error


def run_many(connection: Connection, statements: Sequence[tuple[str, Any]]) -> list[Any]:
    """Send the queued statements, then each of ``statements`` (lookups, see :func:`_run`), in
    one round trip; their cursors, in order."""
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        cursors = []
        with _pipeline(connection, driver, connection.info.get(_PENDING) or []):
            for sql, params in statements:
                cursor = driver.cursor()
                cursor.execute(sql, params, prepare=False)
                cursors.append(cursor)
        return cursors
    except psycopg.Error as error:
        raise DBAPIError.instance(statements[0][0], None, error, psycopg.Error) from error


@contextlib.contextmanager
def _pipeline(connection: Connection, driver: Any, pending: _Queue) -> Iterator[None]:
    """A pipeline that sends ``pending`` first; leaving it waits for every result and raises
    the first failure."""
    connection.info[_PENDING] = []
    queued = driver.cursor()
    with driver.pipeline():
        for statement, values, prepare in pending:
            queued.execute(statement, values, prepare=prepare)
        yield
    queued.close()


def _send_queued(connection: Connection, *_: Any) -> None:
    run(connection, None, None)


def commit_queued(connection: Connection) -> None:
    """Before a commit: the queued statements and the COMMIT itself in one round trip (the
    driver's own commit that follows finds the transaction ended, and does nothing)."""
    pending = connection.info.get(_PENDING)
    if not pending:
        return
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        with _pipeline(connection, driver, pending):
            driver.commit()
    except psycopg.Error as error:
        raise DBAPIError.instance("COMMIT", None, error, psycopg.Error) from error


def drop_queued(connection: Connection, *_: Any) -> None:
    connection.info.pop(_PENDING, None)


def drop_on_checkin(dbapi_connection: Any, record: Any) -> None:
    if record is not None:
        record.info.pop(_PENDING, None)
        record.info[IDLE_SINCE] = time.monotonic()
