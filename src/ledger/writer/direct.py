"""The direct writer: each command in a unit of work of its own, and the one retry loop."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from .._process import paused_gc
from ..errors import StoreBusy, StoreUnavailable
from ..stores import Retry, Store
from .port import Command

R = TypeVar("R")


def failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


class DirectWriter:
    """Each command in a unit of work of its own, re-run when it lost a race (the retry loop).

    :meth:`run` applies in the caller's thread; :meth:`submit` on a pool of ``threads`` workers,
    with at most ``max_queue`` commands waiting for one (more are refused with ``store.busy``).
    """

    def __init__(
        self, store: Store, *, max_attempts: int = 8, threads: int = 16, max_queue: int = 10_000
    ) -> None:
        self.store = store
        self.max_attempts = max_attempts
        self.threads = threads
        self.max_queue = max_queue
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending = 0
        self._closed = False

    def run(self, command: Command[R]) -> R:
        with paused_gc(command.size):
            for attempt in range(1, self.max_attempts + 1):
                try:
                    with self.store.unit_of_work(bulk=command.bulk) as uow:
                        result = command.apply(uow)
                        uow.commit()
                        return result
                except Retry as race:
                    if attempt == self.max_attempts:
                        raise StoreBusy(
                            f"gave up after {attempt} attempts: {race.message}"
                        ) from race
                    # Jittered backoff so that racing writers do not collide again in lockstep.
                    time.sleep(random.uniform(0, 0.005 * 2**attempt))
        raise AssertionError("unreachable")

    def submit(self, command: Command[R]) -> Future[R]:
        with self._lock:
            if self._closed:
                return failed(StoreUnavailable("the ledger is closed"))
            if self._pending >= self.max_queue:
                return failed(StoreBusy(f"{self._pending} writes are waiting: re-send later"))
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="ledger-writer")
            self._pending += 1
            future = self._pool.submit(self.run, command)
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Future[Any]) -> None:
        with self._lock:
            self._pending -= 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool = self._pool
        if pool is not None:
            pool.shutdown(wait=True)
