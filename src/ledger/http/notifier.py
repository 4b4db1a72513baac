"""One shared watcher that wakes every long-poll of ``GET /admin/events`` when an event commits.

Each waiting request used to poll on its own: a check every 10 ms on the event loop and a read
of the database every 0.2 s (events committed by other processes). 300 idle waiters took half a
core. Here one task per app does both, and only while someone waits: it looks at the ledger's
in-process counter every :data:`ledger.service.EVENT_TICK` seconds and reads the feed's head
every :data:`ledger.service.EVENT_POLL` seconds, and wakes every waiter at once when either
moved; each waiter then reads its page once. The number of waiters is capped
(``LEDGER_EVENT_WAITERS``): beyond it a long-poll is answered 503 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
from prometheus_client import Counter, Gauge

from ..errors import LedgerError
from ..service import EVENT_POLL, EVENT_TICK
from .runtime import Runtime

__all__ = ["EventNotifier", "TooManyWaiters"]

log = logging.getLogger("ledger.server")


class TooManyWaiters(LedgerError):
    """Every long-poll slot is taken: ask again in a moment."""

    key = "events.too_many_waiters"
    status = 503
    retryable = True


class EventNotifier:
    """The waiters of one app's event feed (see the module's docstring)."""

    def __init__(self, runtime: Runtime, max_waiters: int) -> None:
        self._runtime = runtime
        self._max = max_waiters
        self._waiters = 0
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        registry = runtime.metrics.registry
        self.gauge = Gauge(
            "ledger_event_waiters", "Long-polls of /admin/events waiting now.", registry=registry
        )
        self.refused = Counter(
            "ledger_event_waiters_refused",
            "Long-polls of /admin/events refused with 503: LEDGER_EVENT_WAITERS were waiting.",
            registry=registry,
        )

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """Hold one of the waiters' places, or :class:`TooManyWaiters`."""
        if self._waiters >= self._max:
            self.refused.inc()
            raise TooManyWaiters(
                f"{self._max} long-polls are waiting already: ask again in a moment"
            )
        self._waiters += 1
        self.gauge.inc()
        try:
            yield
        finally:
            self._waiters -= 1
            self.gauge.dec()

    def ticket(self) -> asyncio.Event:
        """Set at the next change. Taken *before* reading the feed, so that an event committed
        between that read and the wait still wakes the waiter."""
        if self._changed is None:
            self._changed = asyncio.Event()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="ledger-event-notifier")
        return self._changed

    async def wait(self, ticket: asyncio.Event, seconds: float) -> None:
        """Until ``ticket`` is set (something committed) or ``seconds`` have passed."""
        with anyio.move_on_after(seconds):
            await ticket.wait()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
        self._changed = asyncio.Event()

    async def _watch(self) -> None:
        runtime = self._runtime
        loop = asyncio.get_running_loop()
        seen: int | None = None
        head: int | None = None
        read_at = 0.0
        # Lingers a poll's length after the last waiter leaves: a client reading on at once
        # does not restart it.
        idle_since: float | None = None
        while True:
            if self._waiters == 0:
                idle_since = idle_since or loop.time()
                if loop.time() - idle_since > EVENT_POLL:
                    self._task = None
                    return
            else:
                idle_since = None
            try:
                opened = runtime.opened()
                ledger = opened if opened is not None else await runtime.offload(runtime.ledger)
                moved = seen is not None and ledger.events_appended != seen
                seen = ledger.events_appended
                if loop.time() >= read_at:
                    read_at = loop.time() + EVENT_POLL
                    found = await runtime.offload(ledger.last_event_id)
                    moved = moved or (head is not None and found != head)
                    head = found
            except LedgerError as exc:  # the database is down: waiters time out meanwhile
                log.debug("event notifier: %s", exc.message)
                await anyio.sleep(EVENT_POLL)
                continue
            if moved:
                self._wake()
            await anyio.sleep(EVENT_TICK)
