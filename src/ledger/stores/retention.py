"""The SQL stores' :class:`~ledger.stores.port.Retention`: what retention deletes, inside the
unit of work that the writer gives it (so on SQLite it takes its turn with every other write)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime

from sqlalchemy import Connection

from . import deliveries as journal
from . import events as feed

__all__ = ["SqlRetention"]

Translate = Callable[[], AbstractContextManager[None]]


class SqlRetention:
    """Retention's deletes over a unit of work's connection; driver errors translated."""

    def __init__(self, connection: Connection, translate: Translate) -> None:
        self._connection = connection
        self._translate = translate

    def prune_events(self, cutoff: datetime, batch: int, through: int | None = None) -> int:
        with self._translate():
            return feed.prune(self._connection, cutoff, batch, through)

    def prune_deliveries(self, cutoff: datetime, batch: int) -> int:
        with self._translate():
            return journal.prune(self._connection, cutoff, batch)

    def slowest_webhook(self) -> tuple[str, int] | None:
        with self._translate():
            return feed.slowest_cursor(self._connection)
