"""The event feed under ``/admin``: ``GET /admin/events?after=<id>&limit=&wait=&types=``.

Answers ``{"events": [...], "next": <id>}``: the committed events above ``after`` in id order
(commit order), at most ``limit``; read on with ``after=<next>``. With ``wait`` (seconds, at most
:data:`ledger.events.MAX_WAIT`) and nothing to answer yet, it waits: it answers as soon as an
event commits, or empty when the wait ends. While it waits it holds neither the event loop nor a
database connection nor a worker thread: it sleeps on the loop, reads again every
:data:`ledger.service.EVENT_POLL` seconds (events of other processes), and at once when this
process commits one (:attr:`ledger.Ledger.events_appended`).

The route joins the operator router, behind its guard (the operator bearer token) and its log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import anyio
from litestar import get
from litestar.handlers import HTTPRouteHandler
from litestar.params import QueryParameter
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ..events import page_dict, parse_after, parse_types, parse_wait
from ..paging import DEFAULT_LIMIT
from ..service import EVENT_POLL, EVENT_TICK
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
    ) -> dict[str, Any]:
        """``{"events": [...], "next": <id>}``; read on with ``after`` set to ``next``."""
        start, seconds, wanted = parse_after(after), parse_wait(wait), parse_types(types)
        size = DEFAULT_LIMIT if limit in (None, "") else parse_id(limit, "limit")
        ledger = await runtime.offload(runtime.ledger)
        deadline = anyio.current_time() + seconds
        while True:
            seen = ledger.events_appended
            page = await runtime.offload(lambda: ledger.events(start, limit=size, types=wanted))
            left = deadline - anyio.current_time()
            if page.events or left <= 0:
                return page_dict(page)
            with anyio.move_on_after(min(EVENT_POLL, left)):
                while ledger.events_appended == seen:
                    await anyio.sleep(EVENT_TICK)

    return events
