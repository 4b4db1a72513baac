"""The webhook sender, and ``GET /admin/webhooks``.

:class:`WebhookSender` runs one task per configured endpoint (:mod:`ledger.webhooks`). Each
task, in a loop:

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

The database is touched only in short transactions on worker threads (through ``offload``);
no connection is held while a receiver is waited on, and the event loop never blocks.

``ledger serve`` starts it when ``LEDGER_WEBHOOKS`` is set; an embedding process can run it
in its own event loop: ``async with WebhookSender(config, book, source=...): ...``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio
import anyio.to_thread
import httpx
from litestar import get
from litestar.handlers import HTTPRouteHandler
from prometheus_client import CollectorRegistry, Counter, Gauge

from ..errors import LedgerError
from ..service import Ledger
from ..webhooks import (
    BATCH_HEADER,
    LEASE_MARGIN,
    SIGNATURE_HEADER,
    EventSource,
    WebhookConfig,
    WebhookEndpoint,
    backoff,
    cursors,
    ledger_feed,
    sign,
    statuses,
)
from .openapi import operator_docs
from .runtime import Runtime

if TYPE_CHECKING:
    from ..webhooks import CursorRow, WebhookTables

__all__ = ["WebhookMetrics", "WebhookSender", "server_sender", "webhook_handlers"]

log = logging.getLogger("ledger.webhooks")

T = TypeVar("T")

# Seconds before renewing again a lease that came back too short to post in (a slow database).
RENEW_PAUSE = 0.05

# A receiver's error body is quoted in the status up to this many characters.
QUOTED_BODY = 200

# Seconds a clean shutdown waits to hand the leases back (else they lapse by themselves).
RELEASE_TIMEOUT = 2.0

Offload = Callable[[Callable[[], T]], Awaitable[T]]


def _user_agent() -> str:
    try:
        return f"ledger-webhooks/{version('ledger')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "ledger-webhooks"


def _holder_name() -> str:
    # Unique per sender instance, readable in the status: which machine and process sends.
    return f"{socket.gethostname()[:80]}:{os.getpid()}:{secrets.token_hex(4)}"


async def _to_thread(work: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(work)


class WebhookMetrics:
    """The sender's Prometheus metrics, in the server's registry (``GET /metrics``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry(auto_describe=True)
        self.deliveries = Counter(
            "ledger_webhook_deliveries",
            "Webhook batch posts by endpoint and outcome (ok: a 2xx; failed: anything else).",
            ["endpoint", "outcome"],
            registry=registry,
        )
        self.lag_events = Gauge(
            "ledger_webhook_lag_events",
            "Events committed but not yet delivered to the endpoint (reported by the replica "
            "holding its lease).",
            ["endpoint"],
            registry=registry,
        )
        self.lag_seconds = Gauge(
            "ledger_webhook_lag_seconds",
            "Age of the oldest event not yet delivered to the endpoint (0 when none waits).",
            ["endpoint"],
            registry=registry,
        )
        self.missed = Counter(
            "ledger_webhook_missed_events",
            "Events pruned by retention before the endpoint received them (should stay 0: "
            "keep the retention longer than any receiver's outage).",
            ["endpoint"],
            registry=registry,
        )
        self.holding = Gauge(
            "ledger_webhook_holding",
            "1 while this process holds the endpoint's lease (is its one active sender).",
            ["endpoint"],
            registry=registry,
        )


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch in flight: re-sent as is (same bytes, same key) until a 2xx."""

    after: int  # the cursor it starts from
    through: int  # the cursor after it (past unwanted events at its end too)
    key: str  # "<first>-<last>" wanted event ids
    body: bytes
    oldest: datetime  # its first event's commit time: the lag in seconds while it waits


class _EndpointSender:
    """One endpoint's loop (see the module's docstring)."""

    def __init__(self, sender: WebhookSender, endpoint: WebhookEndpoint) -> None:
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


class WebhookSender:
    """Every configured endpoint's sender, in the running event loop.

    ``ledger`` is a :class:`~ledger.service.Ledger` or a blocking function returning one (the
    server's, opened on first use); ``source`` makes the event feed of a ledger (default: the
    ledger's own, :func:`ledger.webhooks.ledger_feed`). ``offload`` runs blocking work on a
    worker thread (default: anyio's threads).
    """

    def __init__(
        self,
        config: WebhookConfig,
        ledger: Ledger | Callable[[], Ledger],
        *,
        source: Callable[[Ledger], EventSource] = ledger_feed,
        metrics: WebhookMetrics | None = None,
        offload: Offload[Any] | None = None,
        clock: Callable[[], datetime] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        holder: str | None = None,
    ) -> None:
        self.config = config
        self._ledger = ledger if callable(ledger) else (lambda: ledger)
        self._source = source
        self.metrics = metrics or WebhookMetrics()
        self._offload: Offload[Any] = offload or _to_thread
        self.clock = clock or (lambda: datetime.now(UTC))
        self._transport = transport
        self.holder = (holder or _holder_name())[:128]
        self.user_agent = _user_agent()
        self.rng = random.Random()
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._senders = [_EndpointSender(self, endpoint) for endpoint in config.endpoints]

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("the webhook sender is not started")
        return self._client

    def holding(self) -> list[str]:
        """The endpoints this sender holds the lease of (is the one active sender for)."""
        return [sender.endpoint.name for sender in self._senders if sender.holding]

    async def db(self, work: Callable[[WebhookTables, EventSource], T]) -> T:
        """Run ``work(tables, source)`` on a worker thread: one short transaction or two."""

        def run() -> T:
            ledger = self._ledger()
            return work(cursors(ledger), self._source(ledger))

        result: T = await self._offload(run)
        return result

    async def start(self) -> None:
        """Start every endpoint's loop in the background (plain asyncio tasks: a sender's
        trouble never reaches the task that started it, such as the server's lifespan)."""
        if self._task is not None:
            return
        # Redirects are failures: a receiver that moved is re-configured, not followed.
        self._client = httpx.AsyncClient(
            transport=self._transport, follow_redirects=False, timeout=httpx.Timeout(60.0)
        )
        self._task = asyncio.create_task(self._run_all(), name="ledger-webhooks")

    async def _run_all(self) -> None:
        names = [endpoint.name for endpoint in self.config.endpoints]
        while True:
            try:
                await self.db(lambda tables, _: tables.ensure(names))
                break
            except LedgerError as exc:
                log.warning("webhooks: database not available yet (%s)", exc.message)
                await anyio.sleep(self.config.poll)
        await asyncio.gather(*(sender.run() for sender in self._senders))

    async def stop(self) -> None:
        """Stop every loop (a batch in flight is re-sent by whoever sends next) and hand the
        leases back so that another replica takes over at once."""
        await self._halt(release=True)

    async def abandon(self) -> None:
        """Stop every loop as a process that died would: the leases are left to lapse."""
        await self._halt(release=False)

    async def _halt(self, *, release: bool) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        held = self.holding()
        if held and release:
            with anyio.move_on_after(RELEASE_TIMEOUT):
                try:
                    await self.db(lambda tables, _: tables.release(held, self.holder))
                except LedgerError as exc:
                    log.warning("webhooks: leases not handed back (%s); they lapse", exc.message)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def server_sender(runtime: Runtime) -> WebhookSender | None:
    """The server's sender when ``LEDGER_WEBHOOKS`` is set: on the server's ledger (opened on
    first use), its worker threads and its metrics registry."""
    config = runtime.settings.webhooks
    if config is None:
        return None
    return WebhookSender(
        config,
        runtime.ledger,
        metrics=WebhookMetrics(runtime.metrics.registry),
        offload=runtime.offload,
    )


def webhook_handlers(
    runtime: Runtime, source: Callable[[Ledger], EventSource] = ledger_feed
) -> list[HTTPRouteHandler]:
    """``GET /admin/webhooks``, bound to ``runtime`` (joins the operator router)."""

    @get(
        "/webhooks",
        summary="Each webhook endpoint's cursor, lag, last error and sender",
        **operator_docs(),
    )
    async def webhooks() -> dict[str, Any]:
        config = runtime.settings.webhooks or WebhookConfig()

        found = await runtime.call(lambda ledger: statuses(ledger, config, source(ledger)))
        return {"endpoints": [item.to_dict() for item in found]}

    return [webhooks]
