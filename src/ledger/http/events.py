"""The event feed under ``/admin``: ``GET /admin/events?after=<id>&limit=&wait=&types=``.

Answers ``{"events": [...], "next": <id>}``: the committed events above ``after`` in id order
(commit order), at most ``limit``; read on with ``after=<next>``. With ``wait`` (seconds, at most
:data:`ledger.events.MAX_WAIT`) and nothing to answer yet, it waits: it answers as soon as an
event commits, or empty when the wait ends. While it waits it holds neither the event loop nor a
database connection nor a worker thread: one shared watcher (:mod:`.notifier`) wakes every
waiter when an event commits, in this process or another; beyond ``LEDGER_EVENT_WAITERS``
waiters a long-poll is answered 503 with ``Retry-After``.

The route joins the operator router, behind its guard (the operator bearer token) and its log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import anyio
from litestar import Response, get
from litestar.handlers import HTTPRouteHandler
from litestar.params import QueryParameter
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ..events import page_dict, parse_after, parse_types, parse_wait
from ..paging import DEFAULT_LIMIT
from .notifier import EventNotifier, TooManyWaiters
from .openapi import operator_docs
from .params import parse_id
from .runtime import Runtime

__all__ = ["events_handler"]


class EventsAppended(Collector):
    """``ledger_events_appended_total``: events this server process has committed (a counter:
    it starts again from 0 with the process, which Prometheus' ``rate()`` handles)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def collect(self) -> Iterator[CounterMetricFamily]:
        ledger = self._runtime.opened()
        yield CounterMetricFamily(
            "ledger_events_appended",
            "Events appended to the feed and committed by this process.",
            value=0 if ledger is None else ledger.events_appended,
        )


def events_handler(runtime: Runtime) -> HTTPRouteHandler:
    """The feed's handler, bound to ``runtime``; registers its metric in the runtime's."""
    runtime.metrics.registry.register(EventsAppended(runtime))
    notifier = EventNotifier(runtime, runtime.settings.event_waiters)

    @get(
        "/events",
        summary="The event feed in commit order, from an id on; long-polls with wait",
        **operator_docs("request.invalid"),
    )
    async def events(
        after: Annotated[str | None, QueryParameter(description="The last id read (0)")] = None,
        limit: Annotated[str | None, QueryParameter(description="At most, 1 to 1000")] = None,
        wait: Annotated[str | None, QueryParameter(description="Seconds, up to 55")] = None,
        types: Annotated[str | None, QueryParameter(description="Comma-separated")] = None,
    ) -> Response[dict[str, Any]]:
        """``{"events": [...], "next": <id>}``; read on with ``after`` set to ``next``."""
        start, seconds, wanted = parse_after(after), parse_wait(wait), parse_types(types)
        size = DEFAULT_LIMIT if limit in (None, "") else parse_id(limit, "limit")
        ledger = await runtime.offload(runtime.ledger)

        def read() -> Any:
            return ledger.events(start, limit=size, types=wanted)

        if seconds <= 0:
            return Response(page_dict(await runtime.offload(read)))
        deadline = anyio.current_time() + seconds
        try:
            async with notifier.waiting():
                while True:
                    ticket = notifier.ticket()
                    page = await runtime.offload(read)
                    left = deadline - anyio.current_time()
                    if page.events or left <= 0:
                        return Response(page_dict(page))
                    await notifier.wait(ticket, left)
        except TooManyWaiters as error:
            return Response(error.to_dict(), status_code=503, headers={"retry-after": "1"})

    return events
