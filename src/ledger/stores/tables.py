"""Tables beside the ledger's journal (operators, webhooks): each read or write is one short
transaction of its own, outside the writer (:mod:`ledger.writer`), since no money moves there.

:class:`SideTables` is what such a module builds on: the store, a transaction per call, and the
reading of SQLite's zoneless timestamps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime

from sqlalchemy import Connection

from .port import Store
from .sql import SqlStore

__all__ = ["SideTables", "utc"]


def utc(moment: datetime | None) -> datetime | None:
    """A stored timestamp in UTC: SQLite hands them back naive, and they were written in UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


class SideTables:
    """Short transactions on ``store`` (a SQL store): see the module's docstring."""

    def __init__(self, store: Store) -> None:
        if not isinstance(store, SqlStore):  # pragma: no cover - every store is a SQL store
            raise TypeError(f"{type(self).__name__} needs a SQL store")
        self._store = store

    @contextlib.contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        """One transaction, committed when the block ends without an error."""
        with self._store.translate_errors():
            connection = self._store.dialect.connect(write=write)
            committed = False
            try:
                yield connection
                connection.commit()
                committed = True
            finally:
                self._store.dialect.release(connection, committed=committed)
