"""The console's pages on the operator's books: users, bets, tournaments, deliveries, holds, the
overview's activity, and a CSV export of every list.

Every page reads through the :class:`~ledger.service.Ledger` methods the ``/admin`` API uses
(never through the API itself, never with a query of its own), pages with their opaque cursors
(:mod:`ledger.paging`), and exports through the API's own CSV path
(:func:`ledger.http.directory._listed`), each export recorded in the audit log (``export``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import QueryParameter
from litestar.response import Stream, Template

from ... import views
from ...contract import EVENTS
from ...deliveries import DeliveryFilter
from ...domain import BetState
from ...errors import BetNotFound, InvalidRequest, LedgerError, TournamentNotFound, UserNotFound
from ...operators import Session
from ...paging import EXPORT_PAGE, Page, csv_lines, every
from ...service import Ledger
from ..filenames import CSV, attachment
from ..runtime import Runtime

__all__ = ["ACTIVITY_DAYS", "LIST_PAGE", "Kit", "books_handlers", "overview_books"]

LIST_PAGE = 25  # rows per page of every list
ACTIVITY_DAYS = 7  # the overview's chart
DELIVERY_HOURS = 24  # the overview's deliveries

Text = Annotated[str | None, QueryParameter()]
STATES = tuple(state.value for state in BetState)


@dataclass(frozen=True, slots=True)
class Kit:
    """What the console's core (:func:`ledger.http.console.console_handlers`) lends the pages."""

    runtime: Runtime
    call: Callable[[Callable[[Ledger], Any]], Awaitable[Any]]
    signed_in: Callable[[Request[Any, Any, Any]], Awaitable[Session]]
    page: Callable[..., Template]
    failed: Callable[[Request[Any, Any, Any], Session | None, LedgerError], Template]
    audit: Callable[..., Callable[[Ledger], None]]


def overview_books(ledger: Ledger) -> dict[str, Any]:
    """The overview's part of the books: deliveries of the last day by event and outcome, the
    stale holds' count, and the activity per hour (as the chart's series and as a table)."""
    now = datetime.now(UTC)
    hours = ledger.activity(ACTIVITY_DAYS, now=now)
    return {
        "deliveries": ledger.delivery_counts(DELIVERY_HOURS, now=now),
        "deliveries_since": _query_time(now - timedelta(hours=DELIVERY_HOURS)),
        "stale_holds": ledger.count_stale_holds(),
        "activity": [row.to_dict() for row in hours],
        "chart": _chart(hours, now),
        "activity_days": ACTIVITY_DAYS,
    }


def _chart(hours: Sequence[views.HourActivity], now: datetime) -> dict[str, Any]:
    """Per currency, one value per hour of the window (quiet hours are zero): ``x`` in epoch
    seconds, amounts as decimal text (the page draws them; nothing is computed from them)."""
    last = int(now.timestamp()) // 3600 * 3600
    slots = [last - 3600 * step for step in reversed(range(24 * ACTIVITY_DAYS))]
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


def _query_time(moment: datetime) -> str:
    # As a datetime-local field shows it (minutes, UTC): the deliveries form takes it back.
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def _integer(text: str | None, name: str) -> int | None:
    if text is None or not text.strip():
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise InvalidRequest(f"{name}: expected an integer, got {text[:64]!r}") from None


def _listing(
    key: str, found: Page[Any], shape: Callable[[Any], Any] | None = None
) -> dict[str, Any]:
    """A page of a list as its template reads it: the rows under ``key`` (each by ``shape``,
    else its ``to_dict``), and ``next``, the cursor of the page after."""
    rows = [shape(item) if shape else item.to_dict() for item in found.items]
    return {key: rows, "next": found.next}


def _stream(name: str, lines: Iterable[str]) -> Stream:
    return Stream(
        lines,
        media_type=CSV,
        headers={"Content-Disposition": attachment(f"{name}.csv")},
    )


def books_handlers(kit: Kit) -> list[Any]:
    """The books' pages and exports, under the console's router."""

    async def shown(
        request: Request[Any, Any, Any],
        session: Session,
        template: str,
        read: Callable[[Ledger], dict[str, Any]],
        partial: str | None = None,
        **context: Any,
    ) -> Template:
        """``template`` with what ``read`` found, or the error page when it refused."""
        try:
            found = await kit.call(read)
        except LedgerError as error:
            return kit.failed(request, session, error)
        return kit.page(request, session, template, partial=partial, **context, **found)

    async def exported(
        request: Request[Any, Any, Any],
        name: str,
        read: Callable[[Ledger, str | None, int], Page[Any]],
        columns: Sequence[str],
        **filters: Any,
    ) -> Response[Any]:
        """Every row of a list as CSV, through the API's own export path; audited."""
        session = await kit.signed_in(request)
        # Imported here: the directory's module imports the operator API, which imports the
        # console (its audit route).
        from ..directory import _listed

        chosen = {key: value for key, value in filters.items() if value not in (None, "")}
        try:
            answer = await _listed(kit.runtime, name, read, EXPORT_PAGE, None, "csv", columns)
        except LedgerError as error:
            await kit.call(kit.audit(request, session, "export", name, outcome=error.key, **chosen))
            return kit.failed(request, session, error)
        await kit.call(kit.audit(request, session, "export", name, **chosen))
        return answer

    # --- users ----------------------------------------------------------------------------------

    @get("/users", include_in_schema=False)
    async def users(
        request: Request[Any, Any, Any],
        uid: Text = None,
        q: Text = None,
        before: Text = None,
        bets_before: Text = None,
    ) -> Template:
        """The users found by uid or name, or one user: balances, statement, bets."""
        session = await kit.signed_in(request)
        if not uid:

            def listed(ledger: Ledger) -> dict[str, Any]:
                found = ledger.users(q or None, limit=LIST_PAGE, before=before or None)
                return _listing("users", found)

            return await shown(request, session, "users.html", listed, q=q or "", uid=None)
        chosen = uid

        def one(ledger: Ledger) -> dict[str, Any]:
            found = ledger.user(chosen)
            if found is None:
                raise UserNotFound(f"user {chosen} is unknown")
            statement = ledger.statement_page(chosen, limit=LIST_PAGE, before=before or None)
            bets = ledger.bets(chosen, limit=LIST_PAGE, before=bets_before or None)
            return {
                "user": found.to_dict(),
                "balances": found.to_dict().get("balances", []),
                "lines": [line.to_dict() for line in statement.items],
                "next": statement.next,
                "bets": [bet.to_dict() for bet in bets.items],
                "bets_next": bets.next,
            }

        # htmx asking for older statement lines gets only the rows.
        partial = "_statement_rows.html" if before else None
        return await shown(request, session, "users.html", one, partial, uid=uid, q="")

    @get("/users.csv", include_in_schema=False)
    async def users_csv(request: Request[Any, Any, Any], q: Text = None) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            return ledger.users(q or None, limit=size, before=after)

        return await exported(request, "users", read, views.USER_COLUMNS, q=q)

    @get("/statement.csv", include_in_schema=False)
    async def statement_csv(request: Request[Any, Any, Any], uid: Text = None) -> Response[Any]:
        user = uid or ""

        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            if after is None:
                ledger.require_user(user)
            return ledger.statement_page(user, limit=size, before=after)

        return await exported(request, "statement", read, views.STATEMENT_COLUMNS, uid=uid)

    # --- bets -----------------------------------------------------------------------------------

    @get("/bets", include_in_schema=False)
    async def bets(
        request: Request[Any, Any, Any],
        uid: Text = None,
        user: Text = None,
        pool: Text = None,
        # Named state_ in Python: Litestar reserves "state" for the application state.
        state_: Annotated[str | None, QueryParameter(name="state")] = None,
        before: Text = None,
    ) -> Template:
        """One bet (lifecycle, postings, the deliveries that named it), or a list of bets."""
        session = await kit.signed_in(request)
        state = state_
        filters: dict[str, Any] = {
            "user": user or "",
            "pool": pool or "",
            "state": state or "",
            "states": STATES,
        }
        if not uid:

            def listed(ledger: Ledger) -> dict[str, Any]:
                found = ledger.bets(
                    user or None,
                    _integer(pool, "pool"),
                    state or None,
                    limit=LIST_PAGE,
                    before=before or None,
                )
                return _listing("bets", found)

            return await shown(request, session, "bet.html", listed, uid=None, bet=None, **filters)
        chosen = uid

        def one(ledger: Ledger) -> dict[str, Any]:
            number = _integer(chosen, "bet uid")
            found = None if number is None else ledger.bet(number)
            if found is None:
                raise BetNotFound(f"bet {chosen} is unknown")
            return {"bet": found.to_dict(), "bets": None}

        return await shown(request, session, "bet.html", one, uid=uid, **filters)

    @get("/bets.csv", include_in_schema=False)
    async def bets_csv(
        request: Request[Any, Any, Any],
        user: Text = None,
        pool: Text = None,
        state_: Annotated[str | None, QueryParameter(name="state")] = None,
    ) -> Response[Any]:
        state = state_

        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            number = _integer(pool, "pool")
            return ledger.bets(user or None, number, state or None, limit=size, before=after)

        return await exported(
            request, "bets", read, views.BET_COLUMNS, user=user, pool=pool, state=state
        )

    # --- tournaments ----------------------------------------------------------------------------

    @get("/tournaments", include_in_schema=False)
    async def tournaments(
        request: Request[Any, Any, Any],
        uid: Text = None,
        q: Text = None,
        status: Text = None,
        before: Text = None,
    ) -> Template:
        """Tournaments with status and end time, or one with its report and its open holds."""
        session = await kit.signed_in(request)
        # Not "status": the page's own keyword for its HTTP status (kit.page).
        filters = {"q": q or "", "status_filter": status or ""}
        if not uid:

            def listed(ledger: Ledger) -> dict[str, Any]:
                found = ledger.tournaments(
                    status or None, q or None, limit=LIST_PAGE, before=before or None
                )
                return _listing("tournaments", found)

            return await shown(request, session, "tournament.html", listed, uid=None, **filters)
        chosen = uid

        def one(ledger: Ledger) -> dict[str, Any]:
            number = _integer(chosen, "tournament uid")
            found = None if number is None else ledger.tournament(number)
            if found is None or number is None:
                raise TournamentNotFound(f"tournament {chosen} is unknown")
            holds = ledger.holds(pool_uid=number, limit=LIST_PAGE, before=before or None)
            return {"tournament": found.to_dict(), **_listing("holds", holds), "tournaments": None}

        return await shown(request, session, "tournament.html", one, uid=uid, **filters)

    @get("/tournaments.csv", include_in_schema=False)
    async def tournaments_csv(
        request: Request[Any, Any, Any], q: Text = None, status: Text = None
    ) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            return ledger.tournaments(status or None, q or None, limit=size, before=after)

        return await exported(
            request, "tournaments", read, views.TOURNAMENT_COLUMNS, q=q, status=status
        )

    # --- holds ----------------------------------------------------------------------------------

    @get("/holds", include_in_schema=False)
    async def holds(
        request: Request[Any, Any, Any],
        every_open: Annotated[str | None, QueryParameter(name="all")] = None,
        pool: Text = None,
        before: Text = None,
    ) -> Template:
        """Stale holds (or, with ``all``, every open hold), oldest first."""
        session = await kit.signed_in(request)
        stale = not every_open

        def listed(ledger: Ledger) -> dict[str, Any]:
            found = ledger.holds(
                stale=stale,
                pool_uid=_integer(pool, "pool"),
                limit=LIST_PAGE,
                before=before or None,
            )
            return {**_listing("holds", found), "rule": ledger.stale_rule()}

        return await shown(
            request, session, "holds.html", listed, every_open=not stale, pool=pool or ""
        )

    @get("/holds.csv", include_in_schema=False)
    async def holds_csv(
        request: Request[Any, Any, Any],
        every_open: Annotated[str | None, QueryParameter(name="all")] = None,
        pool: Text = None,
    ) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            number = _integer(pool, "pool")
            return ledger.holds(stale=not every_open, pool_uid=number, limit=size, before=after)

        return await exported(request, "holds", read, views.HOLD_COLUMNS, all=every_open, pool=pool)

    # --- deliveries -----------------------------------------------------------------------------

    @get("/deliveries", include_in_schema=False)
    async def deliveries(
        request: Request[Any, Any, Any],
        request_id: Text = None,
        bet: Text = None,
        status: Text = None,
        event: Text = None,
        since: Text = None,
        until: Text = None,
        before: Text = None,
    ) -> Template:
        """The delivery journal searched by request id, bet, status, event and time."""
        session = await kit.signed_in(request)
        form = {
            "request_id": request_id or "",
            "bet": bet or "",
            "status": status or "",
            "event": event or "",
            "since": since or "",
            "until": until or "",
        }

        def listed(ledger: Ledger) -> dict[str, Any]:
            wanted = DeliveryFilter.parse(**form)
            found = ledger.deliveries(wanted, limit=LIST_PAGE, before=before or None)
            return _listing("deliveries", found, views.delivery_dict)

        return await shown(request, session, "deliveries.html", listed, form=form, events=EVENTS)

    @get("/deliveries.csv", include_in_schema=False)
    async def deliveries_csv(
        request: Request[Any, Any, Any],
        request_id: Text = None,
        bet: Text = None,
        status: Text = None,
        event: Text = None,
        since: Text = None,
        until: Text = None,
    ) -> Response[Any]:
        session = await kit.signed_in(request)
        form = {
            "request_id": request_id,
            "bet": bet,
            "status": status,
            "event": event,
            "since": since,
            "until": until,
        }
        chosen = {key: value for key, value in form.items() if value}
        try:
            wanted = DeliveryFilter.parse(**chosen)
            ledger = await kit.call(lambda opened: opened)
        except LedgerError as error:
            await kit.call(kit.audit(request, session, "export", "deliveries", outcome=error.key))
            return kit.failed(request, session, error)
        await kit.call(kit.audit(request, session, "export", "deliveries", **chosen))
        rows = every(lambda after: ledger.deliveries(wanted, limit=EXPORT_PAGE, before=after))
        # Delivery rows have no to_dict: their JSON and CSV shape is views.delivery_dict.
        return _stream(
            "deliveries", csv_lines(map(views.delivery_dict, rows), views.DELIVERY_COLUMNS)
        )

    return [
        users,
        users_csv,
        statement_csv,
        bets,
        bets_csv,
        tournaments,
        tournaments_csv,
        holds,
        holds_csv,
        deliveries,
        deliveries_csv,
    ]
