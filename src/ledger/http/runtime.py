"""What one app instance holds: settings, the ledger, worker threads, metrics.

The ledger's methods block (SQLAlchemy), so every call runs on a worker thread through
:meth:`Runtime.call`, bounded by a capacity limiter sized to the connection pool: more threads
than connections would only queue inside SQLAlchemy's pool, where a wait turns into an error.

The ledger is opened on start-up, not at import time. When the database is down at that moment
the server still starts (so ``/health`` answers and ``/ready`` says 503) and each request tries
to open it again; a callback meanwhile gets 503, which the platform re-sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..errors import StoreUnavailable
from ..service import Ledger, open_ledger
from ..settings import Settings
from .limits import RefusalJournal

__all__ = ["LoopFutures", "Metrics", "Runtime"]

log = logging.getLogger("ledger.server")

T = TypeVar("T")

# Callbacks time out after 2 or 5 minutes on the platform side; the top buckets show how close
# to that a slow delivery came.
# Seconds the shutdown waits for the writer to finish work nobody is waiting for any more.
CLOSE_TIMEOUT = 5.0

# Seconds during which a failed attempt to open the database is answered from memory.
REOPEN_AFTER = 1.0

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


# The error keys of a limit's refusal, with the kind /metrics counts it under.
LIMIT_KEYS = {
    "user.deposit_limit_reached": "deposit",
    "user.stake_limit_reached": "stake",
    "user.loss_limit_reached": "loss",
    "user.excluded": "excluded",
}


class Metrics:
    """Prometheus metrics in a registry of their own, so that tests can build many apps."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.deliveries = Counter(
            "ledger_callback_deliveries",
            "Callback deliveries by event and outcome (ok or the error key).",
            ["event", "outcome", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ledger_callback_duration_seconds",
            "Time from request to response for callback deliveries.",
            ["event"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_progress = Gauge(
            "ledger_callback_in_progress",
            "Callback deliveries being processed.",
            registry=self.registry,
        )
        # Set at each scrape (GET /metrics) from one index range count.
        self.stale_holds = Gauge(
            "ledger_stale_holds",
            "Open holds past their tournament's end plus LEDGER_STALE_HOLD_GRACE, or older than "
            "LEDGER_STALE_HOLD_DAYS: the bets to chase with the platform.",
            registry=self.registry,
        )
        # Responsible-gambling refusals (ledger.domain.limit_gate), of Place Bets and deposits.
        self.limit_refusals = Counter(
            "ledger_limit_refusals",
            "Place Bets and deposits refused by a responsible-gambling limit, by the limit's "
            "kind (deposit, stake, loss) or excluded (an exclusion in force).",
            ["kind"],
            registry=self.registry,
        )
        # Each labelled child, looked up once: ``labels()`` validates and joins its arguments
        # under a lock on every call, a cost paid per delivery on the event loop.
        self._delivered: dict[tuple[str, str, int], Any] = {}
        self._latencies: dict[str, Any] = {}

    def delivered(self, event: str, outcome: str, status: int, seconds: float) -> None:
        """Count one delivery and observe its duration."""
        key = (event, outcome, status)
        counter = self._delivered.get(key)
        if counter is None:
            # Bounded: events are the configured ones, outcomes the error keys.
            counter = self._delivered[key] = self.deliveries.labels(event, outcome, str(status))
        counter.inc()
        if outcome in LIMIT_KEYS:
            self.limit_refused(outcome)
        latency = self._latencies.get(event)
        if latency is None:
            latency = self._latencies[event] = self.latency.labels(event)
        latency.observe(seconds)

    def limit_refused(self, key: str) -> None:
        """Count one refusal by a limit or an exclusion (``key``, one of :data:`LIMIT_KEYS`)."""
        self.limit_refusals.labels(LIMIT_KEYS[key]).inc()


class LoopFutures:
    """Hands the writer's results to the event loop, a whole batch in one loop callback, and
    fails a wait that outlasts its deadline.

    ``asyncio.wrap_future`` schedules one thread-safe callback (a wake-up write on the loop's
    self-pipe, a handle, a state copy) per request. The group-commit writer resolves a batch's
    futures one after another, so the first of them schedules one :meth:`_resolve` and the rest
    join the list it will drain. The loop-side future is not chained back: failing it (a
    deadline) abandons the wait, never the submitted work.

    Deadlines: ``asyncio.timeout`` costs a delivery a timeout object, a timer handle pushed on
    the loop's heap and cancelled again, and a look-up of the current task, about 5 us of the
    event loop's CPU. Every delivery of one kind has the same length of deadline, so they expire
    in the order they arrived: kept in that order (a dict per length), only the oldest of all
    needs a timer, and an answered wait leaves its dict in O(1).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._ready: list[tuple[asyncio.Future[Any], Future[Any]]] = []
        # By length of deadline: each waiting future and when it expires, in arrival order.
        self._deadlines: dict[float, dict[asyncio.Future[Any], float]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def wrap(self, source: Future[T], deadline: float | None = None) -> asyncio.Future[T]:
        """A future of the running loop with ``source``'s outcome, once it has one; or, after
        ``deadline`` seconds without one, a :class:`TimeoutError`."""
        target: asyncio.Future[T] = self._loop.create_future()
        if deadline is not None:
            self._arm(target, deadline)

        def arrived(finished: Future[T]) -> None:
            with self._lock:
                self._ready.append((target, finished))
                first = len(self._ready) == 1
            if first:
                # A closed loop has nobody waiting on it any more.
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._resolve)

        source.add_done_callback(arrived)
        return target

    def _resolve(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        deadlines = self._deadlines.values()
        for target, source in ready:
            for waiting in deadlines:
                waiting.pop(target, None)
            if target.done():
                continue  # its caller gave up waiting (a deadline)
            if source.cancelled():
                target.cancel()
                continue
            error = source.exception()
            if error is not None:
                target.set_exception(error)
            else:
                target.set_result(source.result())

    def _arm(self, target: asyncio.Future[Any], seconds: float) -> None:
        expires = self._loop.time() + seconds
        waiting = self._deadlines.get(seconds)
        if waiting is None:
            waiting = self._deadlines[seconds] = {}
        waiting[target] = expires
        timer = self._timer
        if timer is None or expires < timer.when():
            self._schedule(expires)

    def _schedule(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        earliest: float | None = None
        for waiting in self._deadlines.values():
            expired = []
            for target, expires in waiting.items():  # oldest first: stop at the first not due
                if expires > now:
                    earliest = expires if earliest is None else min(earliest, expires)
                    break
                expired.append(target)
            for target in expired:
                del waiting[target]
                if not target.done():
                    target.set_exception(TimeoutError())
        if earliest is not None:
            self._schedule(earliest)


class Runtime:
    """The per-app state: built by :func:`~ledger.http.app.create_app`, started by its hooks."""

    def __init__(
        self,
        settings: Settings,
        ledger: Ledger | None = None,
        *,
        opening: Future[Ledger] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self.refusals = RefusalJournal(self.metrics.registry)
        # Called at shutdown: what parts of the app started beside the ledger (a thread pool).
        self.on_close: list[Callable[[], None]] = []
        self._ledger = ledger
        self._owns_ledger = ledger is None
        # Its own ledger, being opened already on another thread: taken on first use.
        self._opening = opening
        self._lock = threading.Lock()
        self._failure: StoreUnavailable | None = None
        self._failed_at = 0.0
        self._limiter: anyio.CapacityLimiter | None = None
        self._futures: LoopFutures | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    async def startup(self) -> None:
        # Created here because a limiter belongs to the running event loop.
        self._limiter = anyio.CapacityLimiter(self.settings.worker_threads)
        self._futures = LoopFutures(asyncio.get_running_loop())
        self._warn_about_settings()
        try:
            await anyio.to_thread.run_sync(self.ledger)
        except StoreUnavailable as exc:
            log.warning(
                "database not available at start-up, will retry on each request: %s", exc.message
            )

    def _warn_about_settings(self) -> None:
        settings = self.settings
        if settings.dev_mode:
            log.warning("development mode: generated credentials, valid for this run only")
        if not settings.jwt_secrets:
            log.warning("no LEDGER_JWT_SECRET: every callback will be refused with 401")
        elif settings.client_name is None:
            log.warning("no LEDGER_CLIENT_NAME: callbacks with any client name are accepted")
        if settings.operator_token is None:
            log.info("no LEDGER_OPERATOR_TOKEN: the operator API answers 403 operator.disabled")

    async def shutdown(self) -> None:
        for close in self.on_close:
            close()
        with self._lock:
            ledger, self._ledger = self._ledger, None
        if ledger is not None and self._owns_ledger:
            # Every answered delivery is committed already; what is still queued was abandoned
            # by its caller (a deadline) and is finished here if it can be, within a bound, so
            # that a frozen database cannot keep the process from exiting.
            with anyio.move_on_after(CLOSE_TIMEOUT):
                await anyio.to_thread.run_sync(ledger.close, abandon_on_cancel=True)
                return
            log.warning("the ledger did not close within %g s; exiting anyway", CLOSE_TIMEOUT)

    def opened(self) -> Ledger | None:
        """The ledger if it is open already (never blocks), else ``None``."""
        return self._ledger

    def ledger(self) -> Ledger:
        """The ledger, opened on first use. Blocking: call it from a worker thread."""
        with self._lock:
            if self._ledger is not None:
                return self._ledger
            # While the database is down, every waiting request would otherwise retry the
            # connection in turn, each for up to the connect timeout, and the queue behind this
            # lock would outlast the platform's timeout. Repeat the last failure for a moment.
            if self._failure is not None and time.monotonic() - self._failed_at < REOPEN_AFTER:
                # A fresh exception: re-raising one instance from many threads would grow and
                # tangle its traceback.
                raise type(self._failure)(self._failure.message, key=self._failure.key)
            settings = self.settings
            opening, self._opening = self._opening, None
            try:
                if opening is not None:
                    self._ledger = opening.result()
                else:
                    self._ledger = open_ledger(
                        settings.database_url,
                        currencies=settings.currencies,
                        **settings.ledger_options(),
                    )
            except StoreUnavailable as exc:
                self._failure, self._failed_at = exc, time.monotonic()
                raise
            self._failure = None
            return self._ledger

    # --- running ledger work --------------------------------------------------------------------

    async def offload(self, work: Callable[[], T], *, abandon_on_cancel: bool = False) -> T:
        """Run blocking ``work()`` on a worker thread without blocking the event loop.

        With ``abandon_on_cancel``, a cancelled caller (a deadline) stops waiting while the
        thread runs on to its end.
        """
        return await anyio.to_thread.run_sync(
            work, limiter=self._limiter, abandon_on_cancel=abandon_on_cancel
        )

    def awaitable(self, future: Future[T], deadline: float | None = None) -> asyncio.Future[T]:
        """The writer's ``future`` as a future of the event loop, failed with
        :class:`TimeoutError` after ``deadline`` seconds without an outcome (see
        :class:`LoopFutures`)."""
        if self._futures is None:  # not started (an app driven without its start-up hooks)
            self._futures = LoopFutures(asyncio.get_running_loop())
        return self._futures.wrap(future, deadline)

    async def call(self, work: Callable[[Ledger], T]) -> T:
        """Run ``work(ledger)`` on a worker thread."""
        return await self.offload(lambda: work(self.ledger()))
