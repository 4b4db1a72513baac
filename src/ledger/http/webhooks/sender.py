"""Every configured endpoint's sender, in the running event loop; the server's own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import secrets
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio
import anyio.to_thread
import httpx

from ...errors import LedgerError
from ...service import Ledger
from ...webhooks import EventSource, WebhookConfig, cursors, ledger_feed
from ..runtime import Runtime
from .endpoint import EndpointSender
from .metrics import WebhookMetrics

if TYPE_CHECKING:
    from ...webhooks import WebhookTables

__all__ = ["WebhookSender", "server_sender"]

log = logging.getLogger("ledger.webhooks")

T = TypeVar("T")

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
        self._senders = [EndpointSender(self, endpoint) for endpoint in config.endpoints]

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
