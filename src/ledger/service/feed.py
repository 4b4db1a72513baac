"""The feed: the event feed in commit order (:mod:`ledger.events`) and the callback delivery
journal (:mod:`ledger.deliveries`), with their retention."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from datetime import UTC, datetime

from .. import domain, events
from ..commands import (
    PruneDeliveries,
    PruneEvents,
    RecordDelivery,
)
from ..deliveries import DeliveryFilter, DeliveryRecord, retention_cutoff
from ..events import EventPage
from ..paging import DEFAULT_LIMIT, Page, check_limit, page_of, position
from .core import LedgerCore
from .params import (
    cursor_time,
    timestamp_key,
)

__all__ = ["EVENT_POLL", "EVENT_TICK", "Feed"]

# A waiting reader of the feed asks the database this often (seconds) for other processes'
# events, and looks at this process's own commits (a counter in memory) every tick.
EVENT_POLL = 0.2
EVENT_TICK = 0.01


class Feed(LedgerCore):
    """Events and deliveries: read, waited for, recorded and pruned."""

    def record_delivery(self, record: DeliveryRecord) -> Future[None]:
        """Write a refused delivery's journal row after the fact: a future of the write.

        Through the writer like every write; on SQLite it rides in a group commit, so a flood
        of refusals costs the accepted deliveries no extra commits.
        """
        return self.writer.submit(RecordDelivery(record))

    def deliveries(
        self,
        wanted: DeliveryFilter | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        before: str | None = None,
    ) -> Page[DeliveryRecord]:
        """Journal rows matching ``wanted``, newest first; ``before`` is a page's ``next``."""
        limit = check_limit(limit)
        after = _delivery_position(before)
        chosen = wanted or DeliveryFilter()
        rows = self._read(lambda reads: reads.deliveries(chosen, limit + 1, after))
        return page_of(rows, limit, _delivery_key)

    def prune_deliveries(self, days: int, *, batch: int = 1000) -> int:
        """Delete journal rows received more than ``days`` days ago, ``batch`` rows per
        transaction (no long lock on a busy server); answers how many were deleted."""
        cutoff = retention_cutoff(days)
        total = 0
        while True:
            gone = self.writer.run(PruneDeliveries(cutoff, batch))
            total += gone
            if gone < batch:
                return total

    def events(
        self,
        after: int | str | None = 0,
        *,
        limit: int = DEFAULT_LIMIT,
        types: str | Sequence[str] | None = None,
    ) -> EventPage:
        """Committed events above id ``after``, oldest first, at most ``limit`` (1 to 1000),
        only those of ``types`` when given; read on from the page's ``next``."""
        start = events.parse_after(after)
        size = check_limit(limit)
        wanted = events.parse_types(types)
        scale = self.currencies.scale
        rows = self._read(lambda reads: reads.events(start, size, wanted))
        found = [events.to_event(event_id, at, row, scale) for event_id, at, row in rows]
        return EventPage(found, found[-1].id if found else start)

    def last_event_id(self) -> int:
        """The newest committed event's id (0 before the first): the feed's head."""
        return self._read(lambda reads: reads.last_event_id())

    @property
    def events_appended(self) -> int:
        """Events this process has committed (it changes as soon as one commits: a waiter
        in this process need not ask the database until it does)."""
        return self.store.events_appended

    def wait_for_events(
        self,
        after: int | str | None = 0,
        *,
        wait: float | str | None = None,
        limit: int = DEFAULT_LIMIT,
        types: str | Sequence[str] | None = None,
        poll: float = EVENT_POLL,
    ) -> EventPage:
        """:meth:`events`, waiting up to ``wait`` seconds (at most ``events.MAX_WAIT``) for one
        to commit when there is none yet. Between reads it holds no connection; it reads again
        every ``poll`` seconds, or at once when this process commits an event."""
        seconds = events.parse_wait(wait)
        deadline = time.monotonic() + seconds
        while True:
            seen = self.events_appended
            page = self.events(after, limit=limit, types=types)
            left = deadline - time.monotonic()
            if page.events or left <= 0:
                return page
            until = time.monotonic() + min(poll, left)
            while time.monotonic() < until and self.events_appended == seen:
                time.sleep(EVENT_TICK)

    def prune_events(self, days: int, *, batch: int = 1000, keep_undelivered: bool = True) -> int:
        """Delete events committed more than ``days`` days ago, ``batch`` transactions' events
        per unit of work; answers how many events were deleted. Unless ``keep_undelivered`` is
        false, none past the cursor of the slowest webhook endpoint (:meth:`slowest_webhook`)."""
        cutoff = retention_cutoff(days)
        total = 0
        while gone := self.writer.run(PruneEvents(cutoff, batch, keep_undelivered)):
            total += gone
        return total

    def slowest_webhook(self) -> tuple[str, int] | None:
        """The webhook endpoint that has received the fewest events, and its cursor (the last
        event id it received); ``None`` when no endpoint was ever configured."""
        return self._read(lambda reads: reads.slowest_webhook(), primary=True)


def _delivery_key(row: DeliveryRecord) -> tuple[str, int]:
    return (timestamp_key(row.received_at), row.id or 0)


def _delivery_position(before: str | None) -> tuple[datetime, int] | None:
    key = position(before, str, int)
    return None if key is None else (cursor_time(key[0]), int(key[1]))


_STATES = tuple(state.value for state in domain.BetState)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
