"""The overview's part of the books (the day's deliveries, stale holds, the hourly activity) and
the house's earnings over a chosen period, with their export."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import QueryParameter
from litestar.response import Template

from ... import views
from ...errors import LedgerError
from ...paging import csv_lines
from ...service import Ledger
from .formats import utc_field, when
from .kit import Kit, csv_stream
from .users import known_currencies

__all__ = ["ACTIVITY_DAYS", "EARNINGS_COLUMNS", "earnings_handlers", "overview_books"]

ACTIVITY_DAYS = 7  # the overview's chart at most
DELIVERY_HOURS = 24  # the overview's deliveries
# The earnings' export: the period, then the house's figures per currency.
EARNINGS_COLUMNS = ("since", "until", "currency", *views.HOUSE_FIELDS)

Text = Annotated[str | None, QueryParameter()]


def overview_books(ledger: Ledger) -> dict[str, Any]:
    """The overview's part of the books: deliveries of the last day by event and outcome, the
    stale holds' count, and the activity per hour (as the chart's series and as a table)."""
    now = datetime.now(UTC)
    hours = ledger.activity(ACTIVITY_DAYS, now=now)
    return {
        "deliveries": ledger.delivery_counts(DELIVERY_HOURS, now=now),
        "deliveries_since": when(now - timedelta(hours=DELIVERY_HOURS), minutes=True),
        "stale_holds": ledger.count_stale_holds(),
        "activity": [row.to_dict() for row in hours],
        "chart": chart(hours, now),
        "activity_days": ACTIVITY_DAYS,
    }


def chart(hours: Sequence[views.HourActivity], now: datetime) -> dict[str, Any]:
    """Per currency, one value per hour (quiet hours are zero): ``x`` in epoch seconds, amounts
    as decimal text (the page draws them; nothing is computed from them).

    The hours run from the one before the first busy hour of the window to now: a ledger a few
    hours old gets a chart of those hours, not a week of zeros with a spike at its right edge.
    """
    last = int(now.timestamp()) // 3600 * 3600
    first = last - 3600 * (24 * ACTIVITY_DAYS - 1)
    if hours:
        busy = min(int(row.hour.timestamp()) for row in hours)
        first = max(first, min(busy - 3600, last - 3600))
    slots = list(range(first, last + 1, 3600))
    index = {slot: number for number, slot in enumerate(slots)}
    series: dict[str, dict[str, list[Any]]] = {}
    for row in hours:
        found = series.setdefault(
            row.currency,
            {
                "entries": [0] * len(slots),
                "stakes": ["0"] * len(slots),
                "payouts": ["0"] * len(slots),
            },
        )
        at = index.get(int(row.hour.timestamp()))
        if at is not None:
            found["entries"][at] = row.entries
            found["stakes"][at] = views.amount_text(row.stakes)
            found["payouts"][at] = views.amount_text(row.payouts)
    return {"x": slots, "currencies": series}


def _month_start(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-01 00:00")


def earnings_handlers(kit: Kit) -> list[Any]:
    """The house's earnings page and its export."""

    @get("/earnings", include_in_schema=False)
    async def earnings(
        request: Request[Any, Any, Any],
        since: Text = None,
        until: Text = None,
        currency: Text = None,
    ) -> Template:
        """Per currency, what the house took and paid over ``[since, until)`` (UTC); this
        month so far when nothing is asked."""
        session = await kit.signed_in(request)
        if not request.query_params:
            since = _month_start(datetime.now(UTC))
        form = {"since": since or "", "until": until or "", "currency": currency or ""}

        def read(ledger: Ledger) -> dict[str, Any]:
            report = ledger.house(
                utc_field(since, "since"), utc_field(until, "until"), currency or None
            )
            return {"report": report.to_dict(), "currencies": known_currencies(ledger)}

        return await kit.shown(
            request, session, "earnings.html", read, form=form, fields=views.HOUSE_FIELDS
        )

    @get("/earnings.csv", include_in_schema=False)
    async def earnings_csv(
        request: Request[Any, Any, Any],
        since: Text = None,
        until: Text = None,
        currency: Text = None,
    ) -> Response[Any]:
        session = await kit.signed_in(request)
        chosen = {
            key: value
            for key, value in (("since", since), ("until", until), ("currency", currency))
            if value
        }

        def read(ledger: Ledger) -> list[dict[str, Any]]:
            report = ledger.house(
                utc_field(since, "since"), utc_field(until, "until"), currency or None
            ).to_dict()
            period = {"since": report["since"] or "", "until": report["until"] or ""}
            return [{**period, **item} for item in report["currencies"]]

        try:
            rows = await kit.call(read)
        except LedgerError as error:
            await kit.call(kit.audit(request, session, "export", "earnings", outcome=error.key))
            return kit.failed(request, session, error)
        await kit.call(kit.audit(request, session, "export", "earnings", **chosen))
        return csv_stream("earnings", csv_lines(rows, EARNINGS_COLUMNS))

    return [earnings, earnings_csv]
