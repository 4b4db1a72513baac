"""Group commit: one writer thread applies queued commands in shared, savepointed
transactions, commits once, and only then answers every command.

SQLite with ``synchronous=FULL`` pays an fsync per commit, yet writes hundreds of thousands of
rows a second inside one: this is how Postgres, TigerBeetle and pgledger amortise fsyncs. The
queue is bounded: past ``max_queue`` commands, or while the writer has been stuck on one batch
for ``max_wait`` seconds, a new command is refused at once with 503 ``store.busy``.

Invariant: a command is answered only after the transaction holding its writes committed, and a
command's failure rolls back its own writes only (its savepoint), except in a batch's first run,
which has none: there a failure rolls the unit back and what is left is applied again. Tested
by tests/service/test_group_commit.py and, without a database, tests/unit/test_writer_rules.py.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._process import paused_gc
from ..errors import LedgerError, StoreBusy, StoreUnavailable
from ..stores import Retry, Store, UnitOfWork
from .direct import DirectWriter, failed
from .port import Command

log = logging.getLogger("ledger.writer")

R = TypeVar("R")


@dataclass(eq=False)
class _Job(Generic[R]):
    command: Command[R]
    # Where its outcome goes: the future its submitter waits on, or, for a command applied by
    # apply_now (future None), ``outcome``. A future's condition, lock and set_result cost 5 us
    # a command, a thirtieth of the writer process's Place Bet, for a caller who waits on none.
    future: Future[R] | None = None
    outcome: tuple[bool, Any] | None = None

    def settle(self, ok: bool, value: Any) -> None:
        future = self.future
        if future is None:
            self.outcome = (ok, value)
        elif not future.done():  # a caller may have cancelled its wait
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_STOP: Any = object()


class GroupCommit:
    """One writer thread applying queued commands in shared, savepointed transactions.

    On a store that admits one writer at a time (SQLite) every command goes through the queue.
    On one that admits many (Postgres) only Place Bets do; refunds, settles and movements go to
    ``direct`` and keep their own connections, so that a huge settle never holds up entries.
    A command that lost a race inside a batch is handed to ``direct``, whose retry loop runs it
    again.
    """

    def __init__(
        self,
        store: Store,
        direct: DirectWriter,
        *,
        max_batch: int = 512,
        max_queue: int = 10_000,
        max_wait: float = 10.0,
    ) -> None:
        self.store = store
        self.direct = direct
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.max_wait = max_wait
        self._queue: queue.SimpleQueue[_Job[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._queued = 0  # submitted, not yet taken into a batch
        self._batch_started: float | None = None  # while the writer applies a batch
        self.batches = 0  # how many commits; with ``commands``, the average batch size
        self.commands = 0

    def _grouped(self, command: Command[Any]) -> bool:
        return self.store.single_writer or command.batched

    def submit(self, command: Command[R]) -> Future[R]:
        if not self._grouped(command):
            return self.direct.submit(command)
        future: Future[R] = Future()
        job = _Job(command, future)
        with self._lock:
            refusal = self._refusal()
            if refusal is not None:
                return failed(refusal)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-group-commit", daemon=True
                )
                self._thread.start()
            self._queued += 1
            self._queue.put(job)
        return future

    def _refusal(self) -> LedgerError | None:
        # Bounded, so that an overload or a frozen database answers 503 at once (the platform
        # re-sends later) instead of growing memory and outlasting the platform's timeout.
        if self._closed:
            return StoreUnavailable("the ledger is closed")
        if self._queued >= self.max_queue:
            return StoreBusy(f"{self._queued} writes are queued: re-send later")
        started = self._batch_started
        if self._queued and started is not None and time.monotonic() - started > self.max_wait:
            return StoreBusy(
                f"the writer has been busy on one batch for over {self.max_wait:g} s: re-send later"
            )
        return None

    def run(self, command: Command[R]) -> R:
        if not self._grouped(command):
            return self.direct.run(command)
        return self.submit(command).result()

    def apply_now(self, commands: Sequence[Command[Any]]) -> list[tuple[bool, Any] | Future[Any]]:
        """Apply ``commands`` on the calling thread, in batches of at most ``max_batch``, each
        as the writer thread applies its batches (the same runs, savepoints and one commit).

        For a caller that gathers its own batches and has nothing else to do meanwhile (the
        writer process): handing them to the writer thread and waiting on its futures cost a
        thread switch each way and a queue per command. Not to be mixed with :meth:`submit` on
        the same writer. Returns each command's outcome, ``(True, result)`` or ``(False,
        error)``, or, for one that lost a race, the future of its retry on the direct writer.
        """
        jobs: list[_Job[Any]] = [_Job(command) for command in commands]
        for start in range(0, len(jobs), self.max_batch):
            self._commit(jobs[start : start + self.max_batch])
        answers: list[tuple[bool, Any] | Future[Any]] = []
        for job in jobs:
            answer = job.outcome if job.outcome is not None else job.future
            assert answer is not None, "every command of a batch is settled or retried"
            answers.append(answer)
        return answers

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None:
            thread.join()
        self.direct.close()

    # --- the writer thread -----------------------------------------------------------------------

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._queue.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if _STOP in batch:
                stopping = True
                batch = [job for job in batch if job is not _STOP]
            with self._lock:
                self._queued -= len(batch)
                self._batch_started = time.monotonic()
            if batch:
                self._commit(batch)
            with self._lock:
                self._batch_started = None

    def _commit(self, batch: list[_Job[Any]]) -> None:
        done: list[tuple[_Job[Any], Any]] = []
        failed: list[tuple[_Job[Any], BaseException]] = []
        raced: list[_Job[Any]] = []
        bulk = any(job.command.bulk for job in batch)
        try:
            runs = _runs(batch)
            if runs[0][0].command.batched:
                # A first run of batched commands (Place Bets) without a savepoint around it. A
                # savepoint is not free. On SQLite, while one is open, every statement journals the
                # pages it changes into a temporary file (its INSERTs into tables with triggers,
                # every multi-row INSERT), 20 us of the writer's CPU per one-bet Place Bet in groups
                # of 30 (139 against 117 us, /proc thread CPU) and 2.5 us a bet in batches of 1,000.
                # On Postgres, opening and releasing one are two round trips of a batch's five or
                # six, each a wait of the writer and a subtransaction of the server. Nothing
                # precedes the first run in the unit of work, so rolling the unit back undoes
                # exactly what its savepoint would have; what is left then goes into a new one.
                # Refunds and settles keep theirs: a set-based settle of 20,000 bets cost 7% more
                # without it (benchmarks/write_path_cpu.py, 22.5 against 21.1 ms per 1,000).
                #
                # When that run is the whole batch (as under steady load), what the store holds
                # back goes with the COMMIT: on Postgres its writes and the commit are then one
                # round trip, not two (benchmark (a): 0.55 against 0.52 of the echo). A write
                # refused there (a bet another process placed meanwhile, say) rolls the unit
                # back like any failure; as nothing was committed, the batch is applied again
                # the way that tells whose failure it was.
                try:
                    rest = self._first_unit(runs, bulk, done, failed, raced, flush=len(runs) > 1)
                except _RefusedAtCommit:
                    done, failed, raced = [], [], []
                    rest = self._first_unit(runs, bulk, done, failed, raced, flush=True)
                runs = [] if rest is None else rest + runs[1:]
            if runs:
                with self.store.unit_of_work(bulk=bulk) as uow:
                    self._apply_runs(uow, runs, done, failed, raced)
                    uow.commit()
        except BaseException as error:
            # The batch did not commit: nothing of it is durable, so every command gets the
            # (retryable) error, even one that had failed on its own: its refusal (a 402, say)
            # may have rested on an earlier command of the batch that never committed, and a
            # 4xx would tell the platform never to re-send it.
            reason: BaseException = error
            if not isinstance(error, LedgerError):
                log.exception("group commit failed")
                reason = StoreUnavailable(f"the batch failed: {error!r}")
            failed = [(job, reason) for job in batch]
            done, raced = [], []
        self.batches += 1
        self.commands += len(batch)
        for job, result in done:
            job.settle(True, result)
        for job, problem in failed:
            job.settle(False, problem)
        for job in raced:
            retried = self.direct.submit(job.command)
            if job.future is None:
                job.future = retried  # apply_now's caller waits on the retry itself
            else:
                _chain(retried, job.future)

    def _first_unit(
        self,
        runs: list[list[_Job[Any]]],
        bulk: bool,
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
        *,
        flush: bool,
    ) -> list[list[_Job[Any]]] | None:
        """The unit of work of a batch that starts with Place Bets: ``None`` if it committed,
        else the runs to apply instead (:meth:`_apply_first`). Raises :class:`_RefusedAtCommit`
        when, unflushed, its commit was refused by the database: nothing committed, and whose
        failure it was not known."""
        with self.store.unit_of_work(bulk=bulk) as uow:
            rest = self._apply_first(uow, runs[0], done, failed, raced, flush=flush)
            if rest is None:
                self._apply_runs(uow, runs[1:], done, failed, raced)
                try:
                    uow.commit()
                except LedgerError as error:
                    # A plain StoreUnavailable: the connection may have died during the COMMIT,
                    # whose outcome is then unknown; only the platform's re-send may resolve it.
                    # Anything else (a Retry, a timeout, a refusal) is the database's answer to
                    # a statement: the transaction was rolled back.
                    if flush or type(error) is StoreUnavailable:
                        raise
                    raise _RefusedAtCommit from error
            return rest

    def _apply_runs(
        self,
        uow: UnitOfWork,
        runs: list[list[_Job[Any]]],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
    ) -> None:
        """Apply ``runs`` in order, each group and each command in a savepoint of its own."""
        for run in runs:
            if len(run) > 1 and self._apply_group(uow, run, done, failed):
                continue
            for job in run:
                self._apply_one(uow, job, done, failed, raced)

    def _apply_first(
        self,
        uow: UnitOfWork,
        run: list[_Job[Any]],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
        *,
        flush: bool = True,
    ) -> list[list[_Job[Any]]] | None:
        """Apply the first run of a fresh unit of work without a savepoint: ``None`` if it went
        through, else the runs to apply instead in a new unit of work (this one must then be
        rolled back): a failed group's commands one by one, nothing for a failed command.
        Unless ``flush``, what the store holds back is left for the commit."""
        scope = _flushed if flush else _held
        if len(run) > 1:
            return (
                None
                if self._apply_group(uow, run, done, failed, scope=scope)
                else [[job] for job in run]
            )
        return None if self._apply_one(uow, run[0], done, failed, raced, scope=scope) else []

    @staticmethod
    def _apply_group(
        uow: UnitOfWork,
        run: list[_Job[Any]],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        *,
        scope: _Scope | None = None,
    ) -> bool:
        """Apply a run of groupable commands in one call; False (nothing written) if it raised."""
        commands = [job.command for job in run]
        try:
            with (scope or _savepoint)(uow), paused_gc(sum(c.size for c in commands)):
                outcomes = commands[0].apply_group(uow, commands)
        except BaseException:  # noqa: BLE001 - each command is then applied alone, in order
            log.debug("a group of %d failed as a whole; applying them one by one", len(run))
            return False
        for job, outcome in zip(run, outcomes, strict=True):
            if isinstance(outcome, LedgerError):
                failed.append((job, outcome))
            else:
                done.append((job, outcome))
        return True

    @staticmethod
    def _apply_one(
        uow: UnitOfWork,
        job: _Job[Any],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        raced: list[_Job[Any]],
        *,
        scope: _Scope | None = None,
    ) -> bool:
        """Apply one command (in a savepoint, or ``scope``); False (nothing written) if it
        raised."""
        try:
            with (scope or _savepoint)(uow), paused_gc(job.command.size):
                result = job.command.apply(uow)
            # Done only once its scope is closed: leaving it sends what Postgres held back,
            # and a failure there is the command's (never answered success as well).
            done.append((job, result))
            return True
        except Retry:
            # Another process won a race on a key: after this batch commits, the direct
            # writer's retry loop runs it again, and it will see the winner's work.
            raced.append(job)
        except BaseException as error:  # noqa: BLE001 - handed to its own caller
            failed.append((job, error))
        return False


# Where a command of a batch is applied: a savepoint, or unguarded (the first run of a unit).
_Scope = Callable[[UnitOfWork], AbstractContextManager[None]]


class _RefusedAtCommit(Exception):
    """A batch's unflushed writes were refused with its COMMIT: nothing of it was committed,
    and it is applied again, flushing, to tell whose failure it was."""


def _savepoint(uow: UnitOfWork) -> AbstractContextManager[None]:
    return uow.savepoint()


@contextmanager
def _flushed(uow: UnitOfWork) -> Iterator[None]:
    """Unguarded: what the store holds back is sent before the scope ends, as a savepoint's
    release sends it, so that a failure among it is the command's own (raced, or refused)
    rather than the whole batch's at commit."""
    yield
    uow.flush()


@contextmanager
def _held(uow: UnitOfWork) -> Iterator[None]:
    """Unguarded, and what the store holds back stays held for the commit (one round trip on
    Postgres); a failure among it fails the commit (see GroupCommit._first_unit)."""
    yield


def _runs(batch: list[_Job[Any]]) -> list[list[_Job[Any]]]:
    """Split a batch into runs of consecutive groupable commands of one kind (small Place
    Bets); other commands alone.

    Deferred commands go last (refused deliveries' journal rows): they touch nothing else, so
    moving them keeps a flood of refusals from splitting the accepted Place Bets into many
    small groups.
    """
    runs: list[list[_Job[Any]]] = []
    deferred = [job for job in batch if job.command.deferred]
    rest = [job for job in batch if not job.command.deferred]
    for job in rest + deferred:
        if runs and _together(runs[-1][0].command, job.command):
            runs[-1].append(job)
        else:
            runs.append([job])
    return runs


def _together(first: Command[Any], then: Command[Any]) -> bool:
    return first.groupable and then.groupable and type(first) is type(then)


def _chain(source: Future[R], target: Future[R]) -> None:
    def copy(finished: Future[R]) -> None:
        if target.done():
            return
        error = finished.exception()
        if error is not None:
            target.set_exception(error)
        else:
            target.set_result(finished.result())

    source.add_done_callback(copy)
