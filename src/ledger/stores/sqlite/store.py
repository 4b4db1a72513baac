"""The SQLite store: one file, WAL with ``synchronous=FULL``, writers taking the lock up front."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import make_url

from ...errors import (
    LedgerError,
)
from ..sql import SqlStore
from .checkpointer import AUTOCHECKPOINT_PAGES, Checkpointer
from .dialect import SqliteDialect
from .exact_sum import ExactSum, exact_add
from .writer_lock import WriterLock

# Helper threads SQLite's sorter may start for one large sort (see SqliteStore._on_connect):
# one per core beside the statement's own thread; SQLite allows at most 8.
SORTER_THREADS = max(1, min(8, (os.cpu_count() or 1) - 1))


log = logging.getLogger("ledger.stores.sqlite")


class SqliteStore(SqlStore):
    """A ledger in one SQLite file; upgrades its own schema on first use."""

    single_writer = True

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float = 10.0,
        migrate: bool = True,
        create: bool = True,
    ) -> None:
        parsed = make_url(url)
        if not parsed.database or parsed.database == ":memory:":
            raise ValueError("the SQLite store needs a file: sqlite:///path/to/ledger.db")
        path = Path(parsed.database).expanduser()
        if not create and not path.is_file():
            # A reader given a mistyped path must not report a new, empty, clean ledger.
            raise LedgerError(
                f"no SQLite database at {str(path)!r}: check the URL, or create it with "
                "`ledger db upgrade`",
                key="store.not_found",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        self.url = url
        self.busy_timeout = busy_timeout
        engine = create_engine(
            url,
            connect_args={"timeout": busy_timeout, "check_same_thread": False},
            pool_size=8,
            max_overflow=16,
        )
        event.listen(engine, "connect", self._on_connect)
        event.listen(engine, "begin", self._on_begin)
        lock = WriterLock(path.with_name(path.name + "-writer"), busy_timeout)
        self._checkpointer = Checkpointer(path)
        super().__init__(url, engine, SqliteDialect(engine, self._checkpointer, lock))
        if migrate:
            self.migrate()

    def close(self) -> None:
        # A checkpoint still copying finishes first (it is safe to stop at any point, but a
        # closed store should leave no thread of its own behind); one not yet started is not:
        # the last connection to close copies the whole log anyway.
        self._checkpointer.close(self.busy_timeout)
        super().close()

    def _on_connect(self, dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Take transactions out of the sqlite3 module's hands so that we can say BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Helper threads for SQLite's sorter: a sort too large for memory (a settle of a
        # million participants sorts its legs, deltas and users) is cut into runs that these
        # sort and merge beside the statement's own thread. A small sort never starts one.
        # Settle of 1,000,000 participants (benchmarks/settle_split.py): 29.8 -> 27.1 s
        # (postings 5.5 -> 4.7 s, users 2.9 -> 2.3 s); one thread or two measured the same on
        # two cores.
        cursor.execute(f"PRAGMA threads={SORTER_THREADS}")
        # The backstop only (see Checkpointer). Said, not assumed: a huge close's commit turns
        # it off and back to this value.
        cursor.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
        # The balancing trigger calls ledger_sum; a schema that may call application functions.
        cursor.execute("PRAGMA trusted_schema=ON")
        cursor.close()
        # typeshed wants a finalize() of int only; SQLite takes int, str or None.
        dbapi_connection.create_aggregate("ledger_sum", 1, cast(Any, ExactSum))
        dbapi_connection.create_function("ledger_add", 2, exact_add, deterministic=True)

    @staticmethod
    def _on_begin(connection: Connection) -> None:
        options = connection.get_execution_options()
        # Where this transaction keeps its temporary data (SqliteDialect.connect), said before
        # BEGIN: SQLite decides where a transaction's statement journals go when it begins, and
        # refuses to move temporary storage inside one that has used it.
        temp = options.get("ledger_temp", "DEFAULT")
        info = connection.connection.info  # the driver connection's, kept across checkouts
        if info.get("temp_store", "DEFAULT") != temp:
            connection.exec_driver_sql(f"PRAGMA temp_store={temp}")
            info["temp_store"] = temp
        connection.exec_driver_sql(f"BEGIN {options.get('ledger_begin', 'IMMEDIATE')}")
