"""SQLite's writer lock across processes: an ``flock`` on ``<db>-writer``, taken before
``BEGIN IMMEDIATE``.

Invariant: at most one process's writer is between its ``BEGIN IMMEDIATE`` and the end of its
transaction, and the lock is let go on every path (:meth:`SqliteDialect.release`). Tested by
tests/stores/test_sqlite_writer_lock.py."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from ...errors import (
    StoreBusy,
    StoreUnavailable,
)


class WriterLock:
    """Who writes next, across the processes and threads writing one SQLite file (see the module
    docstring): an ``flock`` on a companion file, given up after the busy timeout."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout

    def acquire(self) -> int:
        """The descriptor holding the lock; closing it releases the lock."""
        # A descriptor per acquisition: flock excludes open file descriptions, so two threads
        # of one process exclude each other too.
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return descriptor
        except BlockingIOError:
            pass
        except BaseException:
            os.close(descriptor)
            raise
        return self._wait(descriptor)

    def _wait(self, descriptor: int) -> int:
        # A blocking flock wakes the moment the holder lets go (polling wasted up to a sleep's
        # length at every hand-over, and CPU on every poll), but it has no timeout: it waits
        # on a thread of its own, and a writer that gives up leaves it to let go of the lock
        # as soon as it gets it (or of nothing, if it fails).
        outcome: list[BaseException | None] = []
        settled = threading.Lock()
        arrived = threading.Event()

        def block() -> None:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                error: BaseException | None = None
            except OSError as failure:
                error = failure
            with settled:
                if outcome:  # the writer gave up: nobody will close it
                    os.close(descriptor)
                    return
                outcome.append(error)
            arrived.set()

        threading.Thread(target=block, name="ledger-writer-lock", daemon=True).start()
        arrived.wait(self.timeout)
        with settled:
            if not outcome:
                outcome.append(None)  # tells the waiting thread that it is on its own
                raise StoreBusy(f"another writer held the database for over {self.timeout:g} s")
        error = outcome[0]
        if error is not None:
            os.close(descriptor)
            raise StoreUnavailable(f"the database's writer lock failed: {error!r}")
        return descriptor
