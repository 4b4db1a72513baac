"""Group commit: concurrent write requests applied by one writer, one durable commit per batch.

SQLite with ``synchronous=FULL`` pays an fsync per commit (about 3,000 commits a second here),
yet writes hundreds of thousands of rows a second inside one transaction. So concurrent
requests are queued to a single writer thread, which takes everything waiting, applies each
request in its own savepoint (a failing request rolls back alone, its neighbours stay), commits
once, and only then answers every request of the batch: nobody hears "done" before their work is
durable. This is how Postgres, TigerBeetle and pgledger amortise their fsyncs.

Correctness does not depend on the batching: every request still runs the same unit-of-work
code, and the database's unique keys and triggers guard it as before.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .errors import LedgerError, StoreBusy, StoreUnavailable
from .stores import Retry, Store, UnitOfWork

__all__ = ["GroupCommit"]

log = logging.getLogger("ledger.batching")

T = TypeVar("T")


Outcome = Any  # a job's result, or the LedgerError it failed with

GroupWork = Callable[[UnitOfWork, list[Any]], list[Outcome]]
"""Applies the items of several jobs of one kind together and returns one outcome per item, an
exception instance for a job that failed. It must write nothing for a job that fails."""


@dataclass
class _Job(Generic[T]):
    work: Callable[[UnitOfWork], T]
    group: GroupWork | None = None
    item: Any = None
    future: Future[T] = field(default_factory=Future)
    attempts: int = 0


_STOP: Any = object()


class GroupCommit:
    """A writer thread that applies queued units of work in shared, savepointed transactions."""

    def __init__(self, store: Store, *, max_batch: int = 512, max_attempts: int = 8) -> None:
        self.store = store
        self.max_batch = max_batch
        self.max_attempts = max_attempts
        self._queue: queue.SimpleQueue[_Job[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches = 0  # how many commits; with ``requests``, the average batch size
        self.requests = 0

    def submit(
        self,
        work: Callable[[UnitOfWork], T],
        *,
        group: GroupWork | None = None,
        item: Any = None,
    ) -> Future[T]:
        """Queue ``work``; the future resolves after the commit that holds it is durable.

        With ``group``, consecutive queued jobs of the same group are applied together, by one
        call of ``group`` with their ``item``s (set-based writes instead of statements per
        request); ``work`` remains the way to run the job alone.
        """
        job: _Job[T] = _Job(work, group, item)
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the ledger is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ledger-group-commit", daemon=True
                )
                self._thread.start()
            self._queue.put(job)
        return job.future

    def run(
        self,
        work: Callable[[UnitOfWork], T],
        *,
        group: GroupWork | None = None,
        item: Any = None,
    ) -> T:
        """Submit ``work`` and wait for its durable result (or its error)."""
        return self.submit(work, group=group, item=item).result()

    def close(self) -> None:
        """Finish what is queued, then stop the writer."""
        with self._lock:
            self._closed = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None:
            thread.join()

    # --- the writer ------------------------------------------------------------------------------

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
            if batch:
                self._commit(batch)

    def _apply_group(
        self,
        uow: UnitOfWork,
        run: list[_Job[Any]],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
    ) -> bool:
        """Apply a run of same-group jobs in one call; False (nothing written) if it raised."""
        group = run[0].group
        assert group is not None
        try:
            with uow.savepoint():
                outcomes = group(uow, [job.item for job in run])
        except BaseException:  # noqa: BLE001 - each job is then tried alone, in order
            log.debug("group of %d failed as a whole; applying its jobs one by one", len(run))
            return False
        for job, outcome in zip(run, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                failed.append((job, outcome))
            else:
                done.append((job, outcome))
        return True

    def _apply_one(
        self,
        uow: UnitOfWork,
        job: _Job[Any],
        done: list[tuple[_Job[Any], Any]],
        failed: list[tuple[_Job[Any], BaseException]],
        again: list[_Job[Any]],
    ) -> None:
        try:
            with uow.savepoint():
                done.append((job, job.work(uow)))
        except Retry as race:
            # Another process won a race on a key: run it again in a later batch, where it will
            # see the winner's committed work.
            job.attempts += 1
            if job.attempts < self.max_attempts:
                again.append(job)
            else:
                failed.append((job, StoreBusy(f"gave up: {race.message}")))
        except BaseException as error:  # noqa: BLE001 - handed to its own caller
            failed.append((job, error))

    def _commit(self, batch: list[_Job[Any]]) -> None:
        done: list[tuple[_Job[Any], Any]] = []
        failed: list[tuple[_Job[Any], BaseException]] = []
        again: list[_Job[Any]] = []
        try:
            with self.store.unit_of_work() as uow:
                for run in _runs(batch):
                    if len(run) > 1 and self._apply_group(uow, run, done, failed):
                        continue
                    for job in run:
                        self._apply_one(uow, job, done, failed, again)
                uow.commit()
        except BaseException as error:
            # The batch did not commit: nothing of it is durable, so every request that had not
            # already failed on its own gets the (retryable) error instead.
            reason: BaseException = error
            if not isinstance(error, LedgerError):
                log.exception("group commit failed")
                reason = StoreUnavailable(f"the batch failed: {error!r}")
            own = {id(job) for job, _ in failed}
            failed.extend((job, reason) for job in batch if id(job) not in own)
            done, again = [], []
        self.batches += 1
        self.requests += len(batch)
        for job, result in done:
            if not job.future.done():  # a caller may have cancelled its wait
                job.future.set_result(result)
        for job, problem in failed:
            if not job.future.done():
                job.future.set_exception(problem)
        for job in again:
            self._queue.put(job)


def _runs(batch: list[_Job[Any]]) -> list[list[_Job[Any]]]:
    """Split a batch into runs of consecutive jobs of one group (jobs without a group alone)."""
    runs: list[list[_Job[Any]]] = []
    for job in batch:
        if runs and job.group is not None and runs[-1][0].group == job.group:
            runs[-1].append(job)
        else:
            runs.append([job])
    return runs
