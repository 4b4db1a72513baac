"""What one app instance holds: settings, the ledger, worker threads, metrics.

The ledger's methods block (SQLAlchemy), so every call runs on a worker thread through
:meth:`Runtime.call`, bounded by a capacity limiter sized to the connection pool: more threads
than connections would only queue inside SQLAlchemy's pool, where a wait turns into an error.

The ledger is opened on start-up, not at import time. When the database is down at that moment
the server still starts (so ``/health`` answers and ``/ready`` says 503) and each request tries
to open it again; a callback meanwhile gets 503, which the platform re-sends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..errors import StoreUnavailable
from ..service import Ledger, open_ledger
from ..settings import Settings

__all__ = ["Metrics", "Runtime"]

log = logging.getLogger("ledger.server")

T = TypeVar("T")

# Callbacks time out after 2 or 5 minutes on the platform side; the top buckets show how close
# to that a slow delivery came.
# Seconds the shutdown waits for the writer to finish work nobody is waiting for any more.
CLOSE_TIMEOUT = 5.0

# Seconds during which a failed attempt to open the database is answered from memory.
REOPEN_AFTER = 1.0

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


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


class Runtime:
    """The per-app state: built by :func:`~ledger.http.app.create_app`, started by its hooks."""

    def __init__(self, settings: Settings, ledger: Ledger | None = None) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self._ledger = ledger
        self._owns_ledger = ledger is None
        self._lock = threading.Lock()
        self._failure: StoreUnavailable | None = None
        self._failed_at = 0.0
        self._limiter: anyio.CapacityLimiter | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    async def startup(self) -> None:
        # Created here because a limiter belongs to the running event loop.
        self._limiter = anyio.CapacityLimiter(self.settings.worker_threads)
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
            try:
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

    async def call(self, work: Callable[[Ledger], T]) -> T:
        """Run ``work(ledger)`` on a worker thread."""
        return await self.offload(lambda: work(self.ledger()))
