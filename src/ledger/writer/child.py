"""The writer process itself: what the server's child runs, on one thread.

Invariant: a command is answered only once its batch has committed (or with the error that
refused it), exactly once, and the child exits only after applying what it was sent; a database
that cannot be opened answers 503 and is tried again, the child living on. Proved by
``tests/service/test_writer_process.py`` (answers identical to the server's own writer, a child
that dies costs a 503 and never a lost or doubled write, closing finishes what was sent).
"""

from __future__ import annotations

import functools
import gc
import logging
import signal
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from .._process import freeze_heap
from ..errors import LedgerError, StoreUnavailable
from ..logformat import plain_handler
from ..stores import open_store
from .batches import Batches
from .direct import DirectWriter
from .group_commit import GroupCommit
from .pipe import dumps, loads
from .port import Command

# A child that could not open the database tries again after this many seconds.
REOPEN_AFTER = 1.0


@dataclass(frozen=True)
class Ready:
    """The child's first message: it has imported everything, tried the database once, and
    frozen its heap (:func:`ledger._process.freeze_heap`)."""

    frozen: int  # objects its cyclic collector no longer walks


@dataclass(frozen=True)
class ChildSpec:
    """What the child needs to open the same database and writer as the server's."""

    url: str
    store_options: dict[str, Any] = field(default_factory=dict)
    max_queue: int = 10_000
    max_wait: float = 10.0


def configured_log_level() -> int | None:
    """The level this process logs at, if it configured logging (``ledger serve`` does)."""
    root = logging.getLogger()
    return root.level if root.handlers else None


def log_like_the_server(level: int | None) -> None:
    """A spawned child starts with no logging configured, and Python's last-resort handler would
    print its warnings and tracebacks bare: give it the server's plain lines and level."""
    if level is None:
        return
    root = logging.getLogger()
    root.handlers[:] = [plain_handler()]
    root.setLevel(level)


def child_main(spec: ChildSpec, conn: Connection, log_level: int | None = None) -> None:
    """The child process: apply what the server sends, report each outcome once committed.

    One thread does it all: it takes every message already in the pipe, applies their commands
    as one batch (:meth:`GroupCommit.apply_now`: one commit; at most as many as :class:`Batches`
    allows, the rest first in the next), and reports their outcomes in one message; while it
    commits, the next batch gathers in the pipe. A reader thread handing the
    commands to the group-commit writer's thread, and a third reporting their futures, cost the
    child 37 us of CPU a Place Bet (30 and 7, ``benchmarks/threads.py``) and took the GIL from
    the writer, the thread on a Place Bet's critical path, while it worked.
    """
    log_like_the_server(log_level)
    # Ctrl-C in a terminal and a supervisor's SIGTERM reach the whole process group: the server
    # shuts down gracefully, answering what is in flight, which needs this writer until then.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    opened = _Opened(spec)
    opened.writer()  # now, while the server waits for Ready: not on its first Place Bet
    # Its imports and its open database are some 140,000 objects that live as long as it does:
    # unfrozen, the collector walked them all (20 to 30 ms) every few thousand Place Bets, 9 us
    # of its CPU a Place Bet under benchmark (a) and a pause in the middle of a batch.
    freeze_heap()
    reporter = _Reporter(conn)
    if not reporter.send(Ready(gc.get_freeze_count())):
        opened.close()
        return  # the server is gone already
    try:
        batches = Batches()
        stopping = False
        while not stopping:
            try:
                # Holding commands back, it only looks: they go now if nothing else came.
                messages = _received(conn, block=not batches.holding)
            except (EOFError, OSError):
                messages = [None]  # the server is gone: apply what is held, then exit
            stopping = None in messages
            received = [item for message in messages if message is not None for item in message]
            batch = batches.take(received, stopping)
            if batch:
                _apply(opened.writer(), batch, reporter)
    finally:
        opened.close()  # waits for a raced command's retry on the direct writer, if any


def _received(conn: Connection, *, block: bool = True) -> list[Any]:
    """Every message already in the pipe, at least one (blocks for it, unless not ``block``:
    then none if there is none); a ``None`` (stop) last."""
    if not block and not conn.poll(0):
        return []
    messages = [loads(conn.recv_bytes())]
    while messages[-1] is not None and conn.poll(0):
        messages.append(loads(conn.recv_bytes()))
    return messages


def _apply(
    writer: GroupCommit | LedgerError, batch: list[tuple[int, Command[Any]]], reporter: _Reporter
) -> None:
    if isinstance(writer, LedgerError):  # the database could not be opened: 503, tried later
        reporter.send([(ident, False, writer) for ident, _ in batch])
        return
    answers = writer.apply_now([command for _, command in batch])
    outcomes = []
    for (ident, _), answer in zip(batch, answers, strict=True):
        if isinstance(answer, Future):
            # It lost a race (Postgres): the direct writer runs it again, and it is reported then.
            answer.add_done_callback(functools.partial(_report_later, reporter, ident))
        else:
            ok, value = answer
            outcomes.append((ident, ok, value))
    if outcomes:
        reporter.send(outcomes)


def _report_later(reporter: _Reporter, ident: int, future: Future[Any]) -> None:
    error = future.exception()
    reporter.send([(ident, True, future.result()) if error is None else (ident, False, error)])


class _Reporter:
    """The child's end of the pipe: one message of outcomes per batch. Locked, because a raced
    command's retry reports from the direct writer's thread."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, message: Any) -> bool:
        """Send ``message`` (:class:`Ready` or a list of outcomes); False if the server is gone."""
        data = dumps(message) if isinstance(message, Ready) else _pickled(message)
        try:
            with self._lock:
                self._conn.send_bytes(data)
        except (OSError, ValueError):
            return False
        return True


class _Opened:
    """The child's store and writer, opened on demand: a database that is down when the child
    starts (or restarts) answers 503 and is tried again after :data:`REOPEN_AFTER` seconds,
    instead of the child exiting and the server starting (and importing) another per request."""

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self._writer: GroupCommit | None = None
        self._failure: LedgerError | None = None
        self._failed_at = 0.0

    def writer(self) -> GroupCommit | LedgerError:
        if self._writer is not None:
            return self._writer
        if self._failure is not None and time.monotonic() - self._failed_at < REOPEN_AFTER:
            return self._failure
        try:
            store = open_store(self.spec.url, migrate=False, **self.spec.store_options)
        except Exception as error:  # noqa: BLE001 - answered 503, tried again later
            failure = (
                error
                if isinstance(error, LedgerError)
                else StoreUnavailable(f"the writer process cannot open the database: {error!r}")
            )
            self._failure, self._failed_at = failure, time.monotonic()
            return failure
        self._writer = GroupCommit(
            store,
            DirectWriter(store),
            max_queue=self.spec.max_queue,
            max_wait=self.spec.max_wait,
        )
        return self._writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer.store.close()


def _pickled(outcomes: list[tuple[int, bool, Any]]) -> bytes:
    try:
        return dumps(outcomes)
    except Exception:  # noqa: BLE001 - an exception that does not pickle: say what it was
        return dumps(
            [
                (ident, ok, value if _picklable(value) else _stand_in(value))
                for ident, ok, value in outcomes
            ]
        )


def _picklable(value: Any) -> bool:
    try:
        dumps(value)
    except Exception:  # noqa: BLE001
        return False
    return True


def _stand_in(value: Any) -> BaseException:
    if isinstance(value, LedgerError):
        # The same answer (key, status, message), if not the same class.
        copy = LedgerError(value.message, key=value.key, bet_uid=value.bet_uid)
        copy.status, copy.retryable = value.status, value.retryable
        return copy
    return RuntimeError(f"the writer process failed: {value!r}")
