"""Admission to password sign-in: rate limits per client address and overall, and a thread
pool of its own for the password hash; and the rate at which refusals of callers without
valid credentials are journalled (:class:`RefusalJournal`).

One sign-in runs one scrypt hash, 0.3 to 0.7 s of CPU at ``ledger.operators.COST``. Run in the
runtime's worker pool (:meth:`ledger.http.runtime.Runtime.call`), a flood of sign-ins without
any credentials took every worker: 64 connections pushed ``/ready`` to 24.5 s (p50) and the
``/admin`` reads to 12.5 s. Here the hashes run on a pool of ``threads`` threads of their own,
with at most ``queue`` more attempts waiting for one; beyond those, and beyond the rates, an
attempt is refused with 429 (before its body is read, for the rates). ``/ready``, ``/health``,
the callbacks and ``/admin`` never wait behind a sign-in.

The pool's threads run at a lower CPU priority (nice +10, a tenth of a normal thread's share
when the CPU is contended): on a 2-core machine, in the first seconds of a flood, /ready went
from 1.3 to 6.2 ms (p50) with two hashing threads at normal priority and from 1.5 to 3.8 ms with
them niced. When nothing else wants the CPU, a sign-in takes as long as ever.

The rates are moving windows (the ``limits`` library, in memory: they are per process, which
is the unit that has the CPU to protect).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from prometheus_client import CollectorRegistry, Counter

from ..errors import LedgerError

__all__ = [
    "UNAUTHENTICATED_JOURNAL_RATE",
    "RefusalJournal",
    "SignInGate",
    "SignInThrottled",
    "check_rate",
]

T = TypeVar("T")

# The hashing threads' niceness (see the module's docstring).
HASH_NICE = 10


def _lower_priority() -> None:
    # Linux schedules threads one by one: this lowers the calling thread only. Elsewhere (or
    # where it is not allowed), the pool runs at normal priority.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HASH_NICE)


class SignInThrottled(LedgerError):
    """Too many sign-in attempts (from this address, or overall): try again later."""

    key = "auth.throttled"
    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def check_rate(text: str) -> RateLimitItem:
    """A rate such as ``10/minute`` or ``2 per second``; :class:`ValueError` if it is not one."""
    return parse(text)


class SignInGate:
    """The rates and the hashing pool of one app's sign-in (see the module's docstring)."""

    def __init__(self, per_address: str, overall: str, threads: int, queue: int) -> None:
        self._per_address = check_rate(per_address)
        self._overall = check_rate(overall)
        self._rates = MovingWindowRateLimiter(MemoryStorage())
        self._threads = threads
        self._queue = queue
        self._pool = ThreadPoolExecutor(
            threads, thread_name_prefix="ledger-sign-in", initializer=_lower_priority
        )
        self._pending = 0  # running or queued; only touched on the event loop

    def _retry_after(self, item: RateLimitItem, *keys: str) -> int:
        reset = self._rates.get_window_stats(item, *keys).reset_time
        return max(1, math.ceil(reset - time.time()))

    def admit(self, address: str | None) -> None:
        """Count one attempt from ``address``, or :class:`SignInThrottled` if it is over a rate
        (a refused attempt still counts against its address, not against the overall rate)."""
        where = address or "unknown"
        if not self._rates.hit(self._per_address, "address", where):
            raise SignInThrottled(
                "too many sign-in attempts from this address: wait and try again",
                self._retry_after(self._per_address, "address", where),
            )
        if not self._rates.hit(self._overall, "overall"):
            raise SignInThrottled(
                "too many sign-in attempts: wait and try again",
                self._retry_after(self._overall, "overall"),
            )

    async def run(self, work: Callable[[], T]) -> T:
        """Run ``work`` (a sign-in, with its hash) on the hashing pool, or refuse it with
        :class:`SignInThrottled` when the pool and its queue are full."""
        if self._pending >= self._threads + self._queue:
            raise SignInThrottled("the server is busy with other sign-ins: try again", 1)
        self._pending += 1
        try:
            return await asyncio.wrap_future(self._pool.submit(work))
        finally:
            self._pending -= 1

    def close(self) -> None:
        """Stop the pool once what it runs is done (what is queued is dropped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


# Refused deliveries that never showed valid credentials are journalled at most this often per
# process; every one is still counted in the metrics and logged (bounded). Journalled one by one,
# 8 connections without any credentials wrote about 500 journal rows a second.
UNAUTHENTICATED_JOURNAL_RATE = "10/second"


class RefusalJournal:
    """Whether a refused delivery without valid credentials is journalled (a moving window);
    the rest are counted in ``ledger_unauthenticated_refusals_not_journalled``."""

    def __init__(self, registry: CollectorRegistry, rate: str = UNAUTHENTICATED_JOURNAL_RATE):
        self._rate = check_rate(rate)
        self._window = MovingWindowRateLimiter(MemoryStorage())
        self.skipped = Counter(
            "ledger_unauthenticated_refusals_not_journalled",
            "Refused deliveries without valid credentials left out of the delivery journal "
            f"(over {rate}); ledger_callback_deliveries counts them all.",
            registry=registry,
        )

    def admit(self) -> bool:
        if self._window.hit(self._rate, "unauthenticated"):
            return True
        self.skipped.inc()
        return False
