"""Ids drawn from a sequence a block at a time, so that a batch costs no round trip per id.

Invariant: no id is handed out twice, across processes and after a database error (a fresh
block then); ids need not be consecutive nor follow commit order. Tested by
tests/stores/test_postgres_batching.py."""

from __future__ import annotations

import threading

from sqlalchemy import (
    Connection,
    text,
)

# Ids are drawn from their sequences this many at a time and handed out by the process: a group
# of Place Bets needs transaction ids, an event group and delivery ids, each a round trip of its
# own when drawn one group at a time. A sequence value is never given out twice whatever happens
# to the transaction that drew it, so a block outlives the transaction; ids only need to be
# unique (every order is by posting id, time, or uid), and an unused block is a gap, as a
# rolled-back transaction's ids always were.
ID_BLOCK = 1000


class IdBlock:
    """Ids of one sequence, drawn ``ID_BLOCK`` at a time and handed out by this process."""

    def __init__(self, sequence: str) -> None:
        self._sequence = sequence
        self._free: list[int] = []
        self._lock = threading.Lock()  # the group-commit writer and the direct writers share it

    def take(self, connection: Connection, count: int) -> list[int]:
        with self._lock:
            if len(self._free) < count:
                wanted = count - len(self._free) + ID_BLOCK
                self._free += _next_ids(connection, self._sequence, wanted)
            taken = self._free[:count]
            del self._free[:count]
        return taken

    def forget(self) -> None:
        with self._lock:
            self._free = []


def _next_ids(connection: Connection, sequence: str, count: int) -> list[int]:
    rows = connection.execute(
        text(f"SELECT nextval('{sequence}') FROM generate_series(1, :n)"),  # noqa: S608
        {"n": count},
    )
    return [row[0] for row in rows]
