"""The console's delivery journal: every callback the platform delivered, searched by the start
of its request id (any case), bet, status, error key, event and time, and exported as CSV."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import QueryParameter
from litestar.response import Template

from ... import views
from ...contract import EVENTS
from ...deliveries import DeliveryFilter
from ...errors import LedgerError
from ...paging import csv_lines, every
from ...service import Ledger
from .books import listing
from .formats import utc_field
from .kit import LIST_PAGE, Kit, csv_stream

__all__ = ["SHOWN_BETS", "deliveries_handlers"]

Text = Annotated[str | None, QueryParameter()]
# Bet uids a row of the list shows before "and N more" (a settle names thousands; the journal
# keeps the first 20, each findable with the bet search).
SHOWN_BETS = 3
FIELDS = ("request_id", "bet", "status", "error", "event", "since", "until")


def _form(*given: str | None) -> dict[str, str]:
    """The search form's fields (in :data:`FIELDS` order) as typed, trimmed, blank for none."""
    return {name: (value or "").strip() for name, value in zip(FIELDS, given, strict=True)}


def _filter(form: dict[str, str]) -> DeliveryFilter:
    """The search form as a journal filter: the request id is a prefix in any case, times are
    UTC unless they say otherwise."""
    return DeliveryFilter.parse(
        request_prefix=form["request_id"] or None,
        bet=form["bet"] or None,
        status=form["status"] or None,
        error=form["error"] or None,
        event=form["event"] or None,
        since=utc_field(form["since"], "since"),
        until=utc_field(form["until"], "until"),
    )


def deliveries_handlers(kit: Kit) -> list[Any]:
    """The deliveries' page and export."""

    @get("/deliveries", include_in_schema=False)
    async def deliveries(
        request: Request[Any, Any, Any],
        request_id: Text = None,
        bet: Text = None,
        status: Text = None,
        error: Text = None,
        event: Text = None,
        since: Text = None,
        until: Text = None,
        before: Text = None,
    ) -> Template:
        """The delivery journal, newest first, searched by the form's fields."""
        session = await kit.signed_in(request)
        form = _form(request_id, bet, status, error, event, since, until)

        def listed(ledger: Ledger) -> dict[str, Any]:
            found = ledger.deliveries(_filter(form), limit=LIST_PAGE, before=before or None)
            return listing("deliveries", found, views.delivery_dict)

        return await kit.shown(
            request,
            session,
            "deliveries.html",
            listed,
            form=form,
            events=EVENTS,
            shown_bets=SHOWN_BETS,
        )

    @get("/deliveries.csv", include_in_schema=False)
    async def deliveries_csv(
        request: Request[Any, Any, Any],
        request_id: Text = None,
        bet: Text = None,
        status: Text = None,
        error: Text = None,
        event: Text = None,
        since: Text = None,
        until: Text = None,
    ) -> Response[Any]:
        session = await kit.signed_in(request)
        form = _form(request_id, bet, status, error, event, since, until)
        chosen = {key: value for key, value in form.items() if value}
        try:
            wanted = _filter(form)
            ledger = await kit.call(lambda opened: opened)
        except LedgerError as error_found:
            outcome = error_found.key
            await kit.call(kit.audit(request, session, "export", "deliveries", outcome=outcome))
            return kit.failed(request, session, error_found)
        await kit.call(kit.audit(request, session, "export", "deliveries", **chosen))
        rows = every(lambda after: ledger.deliveries(wanted, limit=kit.export_page, before=after))
        # Delivery rows have no to_dict: their JSON and CSV shape is views.delivery_dict.
        return csv_stream(
            "deliveries", csv_lines(map(views.delivery_dict, rows), views.DELIVERY_COLUMNS)
        )

    return [deliveries, deliveries_csv]
