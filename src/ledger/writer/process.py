"""Place Bets applied by a group commit in a process of its own (``LEDGER_WRITER_PROCESS``).

In one process the callback server's event loop and its group-commit writer share one GIL. The
writer lets go of it for every SQLite statement and its commit, and taking it back waits for
whatever event-loop callback holds it then (a request's parsing or answer, about 100 us): under
load the writer spent about as long waiting for the GIL as working, and the two threads together
used less than one core of two (``benchmarks/run.py``). Here the writer of Place Bets
is a child process with a GIL of its own: the server decodes and validates each delivery as
before, sends the command over a pipe, and answers when the child reports it committed.

Only batched commands (Place Bets: :attr:`ledger.writer.port.Command.batched`) go to the child:
refunds, settles, movements and journal rows stay on the server's own writer. On SQLite the two
processes take turns through the store's writer lock, as ``--workers`` do; on Postgres they are two
writers like any others. Correctness is the database's, as for several workers: the child runs the
same :class:`~ledger.writer.GroupCommit` and answers only after its commit. If the child dies,
whatever it had not answered fails with 503 ``store.unavailable`` (the outcome is unknown: the
platform's re-send is idempotent) and the next Place Bet starts a new one. The child exits when the
server's end of the pipe closes (the server exited, even by SIGKILL), after finishing the batch in
hand.

The first child starts with the writer, and opening waits until it has imported and opened the
database (:data:`START_TIMEOUT`): a server is ready when it says so, its first Place Bet does not
pay for an interpreter's start-up, and a restart after a crash takes traffic at once.

Here, the front the service holds. Invariant: a command that is not batched never leaves the
server's own writer, and after :meth:`ProcessWriter.close` nothing more is sent. The child's side
is :mod:`.child`, the server's side of one child :mod:`.child_link`, how batches are cut
:mod:`.batches`, what crosses the pipe :mod:`.pipe`. Proved by
``tests/service/test_writer_process.py``.
"""

from __future__ import annotations

import itertools
import logging
import threading
from concurrent.futures import Future
from typing import TypeVar

from ..errors import StoreUnavailable
from .child import ChildSpec
from .child_link import ChildLink
from .port import Command, Writer

__all__ = ["START_TIMEOUT", "ChildSpec", "ProcessWriter"]

log = logging.getLogger("ledger.writer")

R = TypeVar("R")

# How long opening waits for the first child to be ready; past it, Place Bets queue for it.
START_TIMEOUT = 60.0


class ProcessWriter:
    """A :class:`~ledger.writer.Writer` that sends Place Bets to a child process and everything
    else to ``local`` (the server's own writer)."""

    def __init__(self, local: Writer, spec: ChildSpec) -> None:
        self.local = local
        self.spec = spec
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._closed = False
        self._child: ChildLink | None = ChildLink(spec)
        if not self._child.ready.wait(START_TIMEOUT):
            log.warning(
                "the writer process is not ready after %g s; Place Bets wait for it", START_TIMEOUT
            )

    def submit(self, command: Command[R]) -> Future[R]:
        if not command.batched:
            return self.local.submit(command)
        future: Future[R] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(StoreUnavailable("the ledger is closed"))
                return future
            ident = next(self._ids)
            child = self._child
            if child is None or not child.take(ident, command, future, self.spec.max_queue):
                # None yet, or it died (and failed what it held, see ChildLink): start another.
                child = self._child = ChildLink(self.spec)
                child.take(ident, command, future, self.spec.max_queue)
        return future

    def run(self, command: Command[R]) -> R:
        return self.submit(command).result()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
        if child is not None:
            child.close()
        self.local.close()
