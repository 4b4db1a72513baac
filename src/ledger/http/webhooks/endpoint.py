"""One endpoint's loop. In a loop, it:

1. takes or renews the endpoint's lease (one ``UPDATE``; another replica holding it makes this
   one a standby that tries again every ``poll_seconds``);
2. reads up to ``batch_size`` events after the durable cursor; events of unwanted types are
   passed over (the cursor moves past them without a post);
3. posts the wanted ones, ``{"events": [...]}``, signed, with the batch's first and last ids in
   ``Idempotency-Key``, and only while the lease has more than the endpoint's timeout left, so
   that a replica taking over a lapsed lease never posts alongside it;
4. on a 2xx moves the cursor past the batch (only then: a SIGKILL before it re-sends the one
   batch in flight, nothing else); on anything else (a status, a timeout, a dropped connection)
   records the error and re-sends the same batch after :func:`ledger.webhooks.backoff`.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import httpx

from ...errors import LedgerError
from ...webhooks import (
    BATCH_HEADER,
    LEASE_MARGIN,
    SIGNATURE_HEADER,
    EventSource,
    WebhookConfig,
    WebhookEndpoint,
    backoff,
    sign,
)
from .metrics import WebhookMetrics

if TYPE_CHECKING:
    from ...webhooks import CursorRow, WebhookTables

__all__ = ["EndpointSender", "Sending"]

log = logging.getLogger("ledger.webhooks")

T = TypeVar("T")

# Seconds before renewing again a lease that came back too short to post in (a slow database).
RENEW_PAUSE = 0.05

# A receiver's error body is quoted in the status up to this many characters.
QUOTED_BODY = 200


class Sending(Protocol):
    """What an endpoint's loop uses of the sender that runs it (:class:`.sender.WebhookSender`)."""

    config: WebhookConfig
    metrics: WebhookMetrics
    clock: Callable[[], datetime]
    holder: str
    user_agent: str
    rng: random.Random

    @property
    def client(self) -> httpx.AsyncClient: ...

    async def db(self, work: Callable[[WebhookTables, EventSource], T]) -> T: ...


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch in flight: re-sent as is (same bytes, same key) until a 2xx."""

    after: int  # the cursor it starts from
    through: int  # the cursor after it (past unwanted events at its end too)
    key: str  # "<first>-<last>" wanted event ids
    body: bytes
    oldest: datetime  # its first event's commit time: the lag in seconds while it waits


class EndpointSender:
    """One endpoint's loop (see the module's docstring)."""

    def __init__(self, sender: Sending, endpoint: WebhookEndpoint) -> None:
        self.sender = sender
        self.endpoint = endpoint
        self.config = sender.config
        self.batch: _Batch | None = None
        self.failures = 0
        self.holding = False

    async def run(self) -> None:
        name = self.endpoint.name
        while True:
            try:
                delay = await self.step()
            except LedgerError as exc:
                # The database is down or busy: nothing was moved; try again later.
                self.failures += 1
                delay = self.retry_delay()
                log.warning("webhook %s: %s; retrying in %.1f s", name, exc.message, delay)
            except Exception:
                # A bug must not silence an endpoint for the life of the process: it is logged
                # with its traceback, and the loop goes on from the durable cursor.
                self.failures += 1
                self.batch = None
                delay = self.retry_delay()
                log.exception("webhook %s: unexpected error; retrying in %.1f s", name, delay)
            if delay > 0:
                await anyio.sleep(delay)

    def retry_delay(self) -> float:
        config = self.config
        return backoff(self.failures, config.retry_base, config.retry_cap, self.sender.rng)

    async def step(self) -> float:
        """One turn of the loop; the seconds to wait before the next."""
        sender, endpoint, name = self.sender, self.endpoint, self.endpoint.name
        start = sender.clock()
        until = start + timedelta(seconds=self.config.lease)

        def claim(tables: WebhookTables, source: EventSource) -> tuple[CursorRow | None, int]:
            found = tables.claim(name, sender.holder, start, until)
            return found, (source.head() if found is not None else 0)

        row, head = await sender.db(claim)
        if row is None:
            self.standby()
            return self.config.poll
        if not self.holding:
            log.info("webhook %s: this process now sends (from event %d)", name, row.position)
            self.holding = True
            sender.metrics.holding.labels(name).set(1)
        if self.batch is not None and self.batch.after != row.position:
            self.batch = None  # another sender moved the cursor while this one's lease lapsed
        if self.batch is None:
            self.batch = await self.next_batch(row.position)
        self.report_lag(head, row.position)
        if self.batch is None:
            return self.config.poll
        if not self.batch.key:  # only unwanted events: pass over them
            passed, self.batch = self.batch, None
            await sender.db(
                lambda tables, _: tables.advance(
                    name,
                    sender.holder,
                    passed.after,
                    passed.through,
                    sender.clock(),
                    delivered=False,
                )
            )
            self.report_lag(head, passed.through)
            return 0.0
        left = (until - sender.clock()).total_seconds() - LEASE_MARGIN
        if left < endpoint.timeout:
            # Too little lease left to post in (a slow renewal): renew it first.
            return RENEW_PAUSE
        batch = self.batch
        error = await self.post(batch)
        now = sender.clock()
        if error is None:
            self.batch, self.failures = None, 0
            sender.metrics.deliveries.labels(name, "ok").inc()
            moved = await sender.db(
                lambda tables, _: tables.advance(
                    name, sender.holder, batch.after, batch.through, now, delivered=True
                )
            )
            if moved:
                self.report_lag(head, batch.through)
            else:
                log.warning("webhook %s: lease lost before the cursor moved; re-reading", name)
            return 0.0
        self.failures += 1
        sender.metrics.deliveries.labels(name, "failed").inc()
        await sender.db(lambda tables, _: tables.failed(name, sender.holder, error, now))
        delay = self.retry_delay()
        log.warning(
            "webhook %s: batch %s failed (%s), attempt %d; retrying in %.1f s",
            name,
            batch.key,
            error,
            self.failures,
            delay,
        )
        return delay

    def standby(self) -> None:
        if self.holding:
            log.info("webhook %s: another sender holds the lease; standing by", self.endpoint.name)
        self.holding, self.batch = False, None
        metrics, name = self.sender.metrics, self.endpoint.name
        metrics.holding.labels(name).set(0)
        # The holder reports the lag; a standby's last look would only go stale.
        for gauge in (metrics.lag_events, metrics.lag_seconds):
            gauge.labels(name).set(0)

    def report_lag(self, head: int, position: int) -> None:
        """The lag gauges, from the feed's head and the batch in flight (if any)."""
        metrics, name, batch = self.sender.metrics, self.endpoint.name, self.batch
        metrics.lag_events.labels(name).set(max(0, head - position))
        age = 0.0 if batch is None else (self.sender.clock() - batch.oldest).total_seconds()
        metrics.lag_seconds.labels(name).set(max(0.0, age))

    async def next_batch(self, position: int) -> _Batch | None:
        """The batch after ``position``, or ``None`` when no event waits."""
        endpoint, name = self.endpoint, self.endpoint.name

        def read(_: WebhookTables, source: EventSource) -> tuple[list[Any], list[Any]]:
            events = list(source.read(position, endpoint.batch_size))
            wanted = [event for event in events if endpoint.wants(event.type)]
            return events, [(event, source.body(event)) for event in wanted]

        events, wanted = await self.sender.db(read)
        if not events:
            return None
        if events[0].id > position + 1:
            # Ids have no gaps: the events between were pruned (retention) before this
            # endpoint received them. Nothing can bring them back; say so loudly.
            missed = events[0].id - position - 1
            self.sender.metrics.missed.labels(name).inc(missed)
            log.error(
                "webhook %s: events %d to %d were pruned before delivery",
                name,
                position + 1,
                events[0].id - 1,
            )
        oldest = events[0].committed_at
        if not wanted:
            return _Batch(position, events[-1].id, "", b"", oldest)
        body = json.dumps(
            {"events": [item for _, item in wanted]}, separators=(",", ":"), ensure_ascii=False
        ).encode()
        key = f"{wanted[0][0].id}-{wanted[-1][0].id}"
        return _Batch(position, events[-1].id, key, body, oldest)

    async def post(self, batch: _Batch) -> str | None:
        """Post ``batch`` once: ``None`` on a 2xx, else what went wrong."""
        endpoint = self.endpoint
        headers = {
            "content-type": "application/json",
            # What is quoted of an answer is its first bytes as sent, never a decompression.
            "accept-encoding": "identity",
            SIGNATURE_HEADER: sign(endpoint.secret, batch.body),
            BATCH_HEADER: batch.key,
            "user-agent": self.sender.user_agent,
        }
        # Credentials in the URL travel as Basic auth (as httpx would send them), so that the
        # URL httpx logs at every request carries none.
        url = httpx.URL(endpoint.url)
        auth: httpx.BasicAuth | None = None
        if url.username or url.password:
            auth = httpx.BasicAuth(url.username, url.password)
            url = url.copy_with(username=None, password=None)
        try:
            # httpx's timeout bounds each phase; this bounds the whole exchange, which must end
            # inside the lease.
            # The answer is streamed: of a 2xx nothing is read, of anything else at most
            # QUOTED_BODY bytes, and the connection is dropped with the rest unread. Read whole
            # (client.post), a receiver's never-ending 200 took the server to 2.2 GB.
            with anyio.fail_after(endpoint.timeout):
                async with self.sender.client.stream(
                    "POST", url, content=batch.body, headers=headers, auth=auth
                ) as response:
                    status = response.status_code
                    quoted = b""
                    if not 200 <= status < 300:
                        async for chunk in response.aiter_raw():
                            quoted += chunk[: QUOTED_BODY - len(quoted)]
                            if len(quoted) >= QUOTED_BODY:
                                break
        except TimeoutError:
            return f"timed out after {endpoint.timeout:g} s"
        except httpx.HTTPError as exc:
            return f"{exc.__class__.__name__}: {str(exc)[:QUOTED_BODY]}".rstrip(": ")
        if 200 <= status < 300:
            return None
        text = quoted.decode("utf-8", "replace")
        return f"HTTP {status}: {text}".rstrip(": ")
