"""``GET /admin/deliveries``: the callback delivery journal, a page at a time or all as CSV."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler
from litestar.params import QueryParameter
from litestar.response import Stream

from ... import views
from ...deliveries import DeliveryFilter
from ...errors import InvalidRequest
from ...paging import DEFAULT_LIMIT, EXPORT_PAGE, csv_lines, every
from ..filenames import CSV
from ..openapi import DELIVERIES, operator_docs
from ..params import parse_id
from ..runtime import Runtime

__all__ = ["deliveries_handler"]


def deliveries_handler(runtime: Runtime) -> HTTPRouteHandler:
    """The delivery journal's route, bound to ``runtime``."""

    @get(
        "/deliveries",
        summary="The callback delivery journal, newest first, paginated (or all of it as CSV)",
        **operator_docs("request.invalid", success=DELIVERIES),
    )
    async def deliveries(
        request_id: Annotated[str | None, QueryParameter(description="X-Request-Id")] = None,
        bet: Annotated[str | None, QueryParameter(description="Named this bet uid")] = None,
        status: Annotated[str | None, QueryParameter(description="Answered this status")] = None,
        event: Annotated[str | None, QueryParameter(description="X-Callback-Event")] = None,
        since: Annotated[str | None, QueryParameter(description="Received at or after")] = None,
        until: Annotated[str | None, QueryParameter(description="Received before")] = None,
        limit: Annotated[str | None, QueryParameter(description="Page size, 1 to 1000")] = None,
        before: Annotated[str | None, QueryParameter(description="The previous next")] = None,
        output: Annotated[str | None, QueryParameter(name="format", description="csv")] = None,
    ) -> Response[Any]:
        """``{"deliveries": [...], "next"}``; page on with ``before`` set to ``next``.
        ``format=csv`` streams every page matching the filters (``limit``/``before`` ignored)."""
        wanted = DeliveryFilter.parse(
            request_id=request_id,
            bet=bet,
            status=status,
            event=event,
            since=since,
            until=until,
        )
        if output not in (None, "", "json", "csv"):
            raise InvalidRequest(f"format: expected json or csv, got {output[:16]!r}")
        if output == "csv":
            ledger = await runtime.offload(runtime.ledger)
            rows = every(lambda after: ledger.deliveries(wanted, limit=EXPORT_PAGE, before=after))
            # A plain iterator: Litestar draws each chunk on a worker thread, so the page reads
            # never block the event loop, and only one page is in memory at a time.
            lines = csv_lines(map(views.delivery_dict, rows), views.DELIVERY_COLUMNS)
            return Stream(
                lines,
                media_type=CSV,
                headers={"Content-Disposition": 'attachment; filename="deliveries.csv"'},
            )
        size = DEFAULT_LIMIT if limit in (None, "") else parse_id(limit, "limit")
        page = await runtime.call(
            lambda ledger: ledger.deliveries(wanted, limit=size, before=before)
        )
        return Response(views.deliveries_dict(page.items, page.next))

    return deliveries
