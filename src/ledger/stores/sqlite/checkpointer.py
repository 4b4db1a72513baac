"""The copy of SQLite's log into the database, on a thread of its own (:class:`Checkpointer`).

Invariant: durability is the log's, synced at every commit, whoever copies it and when; a pass
never makes a writer wait, and what one pass leaves the next (or, at worst, a commit's automatic
checkpoint) copies. Tested by tests/stores/test_sqlite_checkpoints.py."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger("ledger.stores.sqlite")


# A commit that leaves the log past this many pages (800 MiB) copies it into the database (a
# checkpoint) before it returns: a backstop, set on every connection (SqliteStore._on_connect),
# for when the Checkpointer cannot keep up. SQLite's default, 1,000, made every eighth group
# commit of Place Bets under benchmark (a) copy the same hot pages again (the ends of the
# tables, the leaves of the users' indexes) and sync the database file, in the commit.
AUTOCHECKPOINT_PAGES = 200_000


# The Checkpointer starts a pass at most this often (seconds). A pass copies each page once
# however many commits changed it since the last, so a longer interval copies less; the log
# holds what is written in one (about 95,000 pages, 370 MiB, under benchmark (a); read again
# when a crashed database opens). Benchmark (a) on SQLite, 15 s runs alternated
# (docs/performance.md): 0.66 to 0.69 of the echo with the copy every 1,000 pages in the
# commit; a pass every 2 s 0.71 and 0.72, every 3 s 0.73 to 0.75.
CHECKPOINT_INTERVAL = 3.0


class Checkpointer:
    """Copies the write-ahead log into the database on a thread of its own, beside the writers.

    Asked after every write commit and after a huge write committed with its checkpoint deferred
    (a bulk unit of work), both by :meth:`SqliteDialect.release`. A pass starts at once if the
    last one began :attr:`interval` seconds ago or more, else when it has; requests meanwhile
    make one pass. A pass is PASSIVE: it copies what no reader still needs and waits for nobody,
    while writers append to the log as usual; it goes again (up to :data:`PASSES` times) while
    the log grew during it, each round shorter. The log starts over only when a writer begins
    with all of it in the database, which under steady writes a pass cannot arrange: so once a
    pass is done, :meth:`caught_up` tells the next writer to copy the rest itself, just after
    its commit (:meth:`SqliteDialect.release`). What a pass leaves (a reader held an old
    snapshot; an error) is copied by the next one, or at worst by a commit's automatic
    checkpoint past :data:`AUTOCHECKPOINT_PAGES`."""

    PASSES = 3

    def __init__(self, path: Path, interval: float = CHECKPOINT_INTERVAL) -> None:
        self.path = path
        self.interval = interval
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False
        self._began = -interval  # time.monotonic() of the last pass's start
        self._done = False  # a pass finished since a writer last asked (caught_up)
        self._closed = threading.Event()

    def request(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._again = True
                return
            if self._closed.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="ledger-checkpoint", daemon=True)
            self._thread.start()

    def caught_up(self) -> bool:
        """Whether a pass finished since the last call (which says so only once)."""
        if not self._done:  # the common case, without the lock: a plain read
            return False
        with self._lock:
            done, self._done = self._done, False
        return done

    def join(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the passes under way or due."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def close(self, timeout: float) -> None:
        """Start no more passes; wait (at most ``timeout`` seconds) for one under way."""
        self._closed.set()
        self.join(timeout)

    def _run(self) -> None:
        while True:
            wait = self._began + self.interval - time.monotonic()
            if wait > 0 and self._closed.wait(wait):
                with self._lock:
                    self._thread = None
                return
            self._began = time.monotonic()
            self._pass()
            with self._lock:  # with the decision: a request meanwhile sees this thread or none
                if not self._again or self._closed.is_set():
                    self._thread = None
                    return
                self._again = False

    def _pass(self) -> None:
        try:
            with contextlib.closing(sqlite3.connect(self.path)) as database:
                for _ in range(self.PASSES):
                    busy, logged, copied = database.execute(
                        "PRAGMA wal_checkpoint(PASSIVE)"
                    ).fetchone()
                    if busy or copied >= logged:
                        break
        except sqlite3.Error as error:
            log.warning("a checkpoint failed (the next one copies the log): %s", error)
            return
        with self._lock:
            self._done = True
