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
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import itertools
import logging
import multiprocessing
import queue
import signal
import threading
import time
import weakref
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from .._process import freeze_heap
from ..errors import LedgerError, StoreBusy, StoreUnavailable
from ..logformat import plain_handler
from ..stores import open_store
from .direct import DirectWriter
from .group_commit import GroupCommit
from .pipe import dumps, loads
from .port import Command, Writer

log = logging.getLogger("ledger.writer")

R = TypeVar("R")

# A child that could not open the database tries again after this many seconds.
REOPEN_AFTER = 1.0

# How long close() waits for the child to finish what it was sent and exit.
CLOSE_TIMEOUT = 30.0

# How long opening waits for the first child to be ready; past it, Place Bets queue for it.
START_TIMEOUT = 60.0


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


class ProcessWriter:
    """A :class:`~ledger.writer.Writer` that sends Place Bets to a child process and everything
    else to ``local`` (the server's own writer)."""

    def __init__(self, local: Writer, spec: ChildSpec) -> None:
        self.local = local
        self.spec = spec
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._closed = False
        self._child: _Child | None = _Child(spec)
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
                # None yet, or it died (and failed what it held, see _Child): start another.
                child = self._child = _Child(self.spec)
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


class _Child:
    """One child process, its pipe, and the server-side threads that feed it and read it."""

    def __init__(self, spec: ChildSpec) -> None:
        # spawn, never fork: the server has threads (a forked lock held by one of them would
        # stay held in the child forever).
        context = multiprocessing.get_context("spawn")
        self._conn, child_end = context.Pipe()
        self.process = context.Process(
            target=child_main,
            args=(spec, child_end, _log_level()),
            name="ledger-writer-process",
            daemon=True,
        )
        self.process.start()
        child_end.close()
        self.waiting: dict[int, Future[Any]] = {}
        self.spec = spec
        # When the child last answered, or was handed work while holding none.
        self._progress = time.monotonic()
        self.outbox: queue.SimpleQueue[tuple[int, Command[Any]] | None] = queue.SimpleQueue()
        self.alive = True
        self.ready = threading.Event()  # set by its Ready message, or when it is gone
        self.frozen = 0  # as its Ready message says
        self._lock = threading.Lock()  # between take() and the receiver's end
        _LIVE.add(self)
        self._sender = threading.Thread(target=self._send, name="ledger-writer-send", daemon=True)
        self._receiver = threading.Thread(
            target=self._receive, name="ledger-writer-receive", daemon=True
        )
        self._sender.start()
        self._receiver.start()

    def take(self, ident: int, command: Command[Any], future: Future[Any], bound: int) -> bool:
        """Send ``command`` to the child, its outcome to ``future``; False if the child is dead."""
        with self._lock:
            if not self.alive:
                return False
            refusal = self._refusal(bound)
            if refusal is not None:
                future.set_exception(refusal)
                return True
            if not self.waiting:
                self._progress = time.monotonic()
            self.waiting[ident] = future
        self.outbox.put((ident, command))
        return True

    def _refusal(self, bound: int) -> StoreBusy | None:
        # Bounded, as the group-commit writer is: an overload or a frozen database answers 503
        # at once (the platform re-sends later) instead of growing memory and outlasting the
        # platform's timeout. The child applies batch after batch and answers each, so one
        # that has answered nothing for max_wait seconds while holding work is stuck on one.
        if len(self.waiting) >= bound:
            return StoreBusy(f"{len(self.waiting)} writes are queued: re-send later")
        max_wait = self.spec.max_wait
        if self.waiting and time.monotonic() - self._progress > max_wait:
            return StoreBusy(
                f"the writer has been busy on one batch for over {max_wait:g} s: re-send later"
            )
        return None

    def _send(self) -> None:
        # One pickle and one write per burst of submissions, not per command.
        while True:
            items = _drain(self.outbox)
            batch = [item for item in items if item is not None]
            try:
                if batch:
                    self._conn.send_bytes(self._pickled(batch))
                if None in items:
                    self._conn.send_bytes(dumps(None))
                    return
            except (OSError, ValueError):
                return  # the child is gone: the receiver sees the pipe close, fails the rest

    def _pickled(self, batch: list[tuple[int, Command[Any]]]) -> bytes:
        try:
            return dumps(batch)
        except Exception:  # noqa: BLE001 - fail only the command that does not pickle
            kept = []
            for ident, command in batch:
                try:
                    dumps(command)
                    kept.append((ident, command))
                except Exception as error:  # noqa: BLE001 - a bug: answered 500, as in process
                    self._settle(ident, False, error)
            return dumps(kept)

    def _settle(self, ident: int, ok: bool, value: Any) -> None:
        with self._lock:
            future = self.waiting.pop(ident, None)
        if future is None:
            return
        with contextlib.suppress(InvalidStateError):  # its caller cancelled its wait
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _receive(self) -> None:
        try:
            while True:
                message = loads(self._conn.recv_bytes())
                if isinstance(message, Ready):
                    self.frozen = message.frozen
                    self.ready.set()
                    continue
                self._progress = time.monotonic()
                for ident, ok, value in message:
                    self._settle(ident, ok, value)
        except (EOFError, OSError):
            pass
        self.ready.set()  # nobody waits for a child that is gone
        with self._lock:
            self.alive = False
            lost, self.waiting = self.waiting, {}
        _LIVE.discard(self)
        if lost:
            # Committed or not, nobody can tell: a 503 makes the platform re-send, idempotently.
            log.error("the writer process stopped with %d writes unanswered", len(lost))
        for future in lost.values():
            with contextlib.suppress(InvalidStateError):
                future.set_exception(
                    StoreUnavailable("the writer process stopped before answering: re-send")
                )

    def close(self) -> None:
        """Let the child finish what it was sent, answer it, and exit."""
        _LIVE.discard(self)
        self.outbox.put(None)
        self._receiver.join(CLOSE_TIMEOUT)
        self.process.join(1.0)
        if self.process.is_alive():
            log.warning("the writer process did not exit within %g s; killing it", CLOSE_TIMEOUT)
            self.process.kill()
            self.process.join()
        self._conn.close()


# Children still running: closed at exit, before multiprocessing joins them (it would wait for
# ever, the child waiting for the pipe to close).
_LIVE: weakref.WeakSet[_Child] = weakref.WeakSet()


@atexit.register
def _close_children() -> None:
    for child in list(_LIVE):
        child.close()


def _drain(source: queue.SimpleQueue[Any]) -> list[Any]:
    """Every item waiting in ``source``, at least one (blocks for it)."""
    items = [source.get()]
    while True:
        try:
            items.append(source.get_nowait())
        except queue.Empty:
            return items


# --- the child ---------------------------------------------------------------------------------


def _log_level() -> int | None:
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
    as one batch (:meth:`GroupCommit.apply_now`: one commit; at most as many as :class:`_Batches`
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
        batches = _Batches()
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


class _Batches:
    """Which of the commands received the child applies next, as one batch (one commit).

    Under steady load from a fixed number of connections (benchmark (a): 64), the batches settle
    into two halves: one commits while the other's connections get their answers and send
    again. Halves that came out uneven stay so (37 and 27 Place Bets, batch after batch), and
    after each smaller one the child waited for the larger half to arrive: 17% of its time
    against 8% for even halves, and (a) on SQLite 0.64 to 0.67 of the echo against 0.73 to
    0.75. So a batch is at most the mean of the last one and what is waiting (rounded up), and
    the rest goes first into the next: uneven halves even out in a batch or two, and a burst
    still grows the batches quickly. Alternated under (a) on SQLite: 0.77, 0.76, 0.83 against
    0.71, 0.73, 0.74; on Postgres 0.43 against 0.44 (docs/performance.md)."""

    def __init__(self) -> None:
        self._held: list[Any] = []
        self._last = 0  # the size of the last batch

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def take(self, received: list[Any], stopping: bool) -> list[Any]:
        """The next batch, held commands first; on ``stopping``, everything."""
        waiting = self._held + received if self._held else received
        if stopping:
            self._held = []
            return waiting
        most = max(1, -(-(self._last + len(waiting)) // 2))
        batch, self._held = waiting[:most], waiting[most:]
        if batch:
            self._last = len(batch)
        return batch


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
