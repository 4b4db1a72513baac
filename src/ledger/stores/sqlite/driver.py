"""Statements straight to SQLite's own driver connection (``sqlite3``), past SQLAlchemy's
execution: the write path's statements (a group commit of Place Bets runs two dozen).

Invariant: a statement runs on the connection SQLAlchemy holds, in its open transaction (never
a connection of its own), and a driver error comes out as SQLAlchemy's ``DBAPIError``, so the
dialect translates it as any other. Proved by the interface contract suite on SQLite (every
write goes through here) and ``tests/stores/test_sqlite_multi_row.py``.
"""

from __future__ import annotations

import sqlite3
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

__all__ = ["driver", "run"]


def driver(connection: Connection) -> sqlite3.Connection:
    return cast(sqlite3.Connection, connection.connection.driver_connection)


def run(
    connection: Connection, sql: str, parameters: Any = (), *, many: bool = False
) -> sqlite3.Cursor:
    """``sql`` on the connection's own ``sqlite3`` connection, in its open transaction.

    SQLAlchemy's ``exec_driver_sql`` costs about 12 µs a statement before SQLite sees it (its
    execution context, events and result wrapper), and a group commit of Place Bets runs two
    dozen statements: a third of the group's fixed cost. The errors are SQLAlchemy's own, so
    :meth:`~ledger.stores.sqlite.dialect.SqliteDialect.translate` reads them as before.
    """
    own = driver(connection)
    try:
        if many:
            return own.executemany(sql, parameters)
        return own.execute(sql, parameters)
    except sqlite3.Error as error:
        raise DBAPIError.instance(sql, parameters, error, sqlite3.Error) from error
