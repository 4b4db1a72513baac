"""The console's pages on the operator's books: bets, tournaments (with their entries) and
holds, and a CSV export of every list.

Every page reads through the :class:`~ledger.service.Ledger` methods the ``/admin`` API uses
(never through the API itself, never with a query of its own), pages with their opaque cursors
(:mod:`ledger.paging`), and exports through the API's own CSV path
(:func:`ledger.http.directory._listed`), each export recorded in the audit log (``export``).
Wherever a tournament's uid is shown, its name is shown beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import QueryParameter
from litestar.response import Template

from ... import views
from ...domain import BetState
from ...errors import BetNotFound, TournamentNotFound
from ...integrity.checkpoints import NoteError, verifier_of
from ...paging import Page
from ...service import Ledger
from ...service.journal import bet_inclusion
from .kit import LIST_PAGE, Kit, integer

__all__ = ["ORDERS", "books_handlers", "listing"]

Text = Annotated[str | None, QueryParameter()]
STATES = tuple(state.value for state in BetState)
# The orders of a list of bets: the last placed first (what a support agent asks for), or by
# the platform's uid.
ORDERS = {"time": "Last placed first", "uid": "Highest uid first"}


def listing(
    key: str, found: Page[Any], shape: Callable[[Any], Any] | None = None
) -> dict[str, Any]:
    """A page of a list as its template reads it: the rows under ``key`` (each by ``shape``,
    else its ``to_dict``), and ``next``, the cursor of the page after."""
    rows = [shape(item) if shape else item.to_dict() for item in found.items]
    return {key: rows, "next": found.next}


def _holds(ledger: Ledger, found: Page[Any]) -> dict[str, Any]:
    """A page of holds, each with its tournament's name."""
    names = ledger.tournament_names(hold.pool_uid for hold in found.items)
    rows = [{**hold.to_dict(), "pool_name": names.get(hold.pool_uid)} for hold in found.items]
    return {"holds": rows, "next": found.next}


def books_handlers(kit: Kit) -> list[Any]:
    """The books' pages and exports, under the console's router."""

    # --- bets -----------------------------------------------------------------------------------

    @get("/bets", include_in_schema=False)
    async def bets(
        request: Request[Any, Any, Any],
        uid: Text = None,
        user: Text = None,
        pool: Text = None,
        # Named state_ in Python: Litestar reserves "state" for the application state.
        state_: Annotated[str | None, QueryParameter(name="state")] = None,
        order: Text = None,
        before: Text = None,
    ) -> Template:
        """One bet (lifecycle, postings, the deliveries that named it), or a list of bets."""
        session = await kit.signed_in(request)
        state = state_
        chosen_order = order if order in ORDERS else "time"
        filters: dict[str, Any] = {
            "user": user or "",
            "pool": pool or "",
            "state": state or "",
            "states": STATES,
            "order": chosen_order,
            "orders": ORDERS,
        }
        if not uid:

            def listed(ledger: Ledger) -> dict[str, Any]:
                found = ledger.bets(
                    user or None,
                    integer(pool, "pool"),
                    state or None,
                    limit=LIST_PAGE,
                    before=before or None,
                    by_time=chosen_order == "time",
                )
                return listing("bets", found)

            return await kit.shown(
                request, session, "bet.html", listed, uid=None, bet=None, **filters
            )
        chosen = uid

        def one(ledger: Ledger) -> dict[str, Any]:
            number = integer(chosen, "bet uid")
            found = None if number is None else ledger.bet(number)
            if found is None:
                raise BetNotFound(f"bet {chosen} is unknown")
            inclusion = bet_inclusion(ledger.store, found.uid, _verifier(kit))
            return {"bet": found.to_dict(), "bets": None, "inclusion": inclusion}

        return await kit.shown(request, session, "bet.html", one, uid=uid, **filters)

    @get("/bets.csv", include_in_schema=False)
    async def bets_csv(
        request: Request[Any, Any, Any],
        user: Text = None,
        pool: Text = None,
        state_: Annotated[str | None, QueryParameter(name="state")] = None,
        order: Text = None,
    ) -> Response[Any]:
        state = state_
        by_time = order != "uid"

        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            number = integer(pool, "pool")
            return ledger.bets(
                user or None, number, state or None, limit=size, before=after, by_time=by_time
            )

        return await kit.exported(
            request, "bets", read, views.BET_COLUMNS, user=user, pool=pool, state=state, order=order
        )

    # --- tournaments ----------------------------------------------------------------------------

    @get("/tournaments", include_in_schema=False)
    async def tournaments(
        request: Request[Any, Any, Any],
        uid: Text = None,
        q: Text = None,
        status: Text = None,
        before: Text = None,
        entries_before: Text = None,
    ) -> Template:
        """Tournaments with status and end time, or one with its report, its entries and its
        open holds."""
        session = await kit.signed_in(request)
        # Not "status": the page's own keyword for its HTTP status (kit.page).
        filters = {"q": q or "", "status_filter": status or ""}
        if not uid:

            def listed(ledger: Ledger) -> dict[str, Any]:
                found = ledger.tournaments(
                    status or None, q or None, limit=LIST_PAGE, before=before or None
                )
                # A status asked for that no tournament has (from a link) stays a choice.
                statuses = sorted({*ledger.tournament_statuses(), *([status] if status else [])})
                return {**listing("tournaments", found), "statuses": statuses}

            return await kit.shown(request, session, "tournament.html", listed, uid=None, **filters)
        chosen = uid

        def one(ledger: Ledger) -> dict[str, Any]:
            number = integer(chosen, "tournament uid")
            found = None if number is None else ledger.tournament(number)
            if found is None or number is None:
                raise TournamentNotFound(f"tournament {chosen} is unknown")
            holds = ledger.holds(pool_uid=number, limit=LIST_PAGE, before=before or None)
            entries = ledger.bets(
                pool=number, limit=LIST_PAGE, before=entries_before or None, by_time=True
            )
            return {
                "tournament": found.to_dict(),
                **_holds(ledger, holds),
                "entries": [bet.to_dict() for bet in entries.items],
                "entries_next": entries.next,
                "tournaments": None,
            }

        return await kit.shown(request, session, "tournament.html", one, uid=uid, **filters)

    @get("/tournaments.csv", include_in_schema=False)
    async def tournaments_csv(
        request: Request[Any, Any, Any], q: Text = None, status: Text = None
    ) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            return ledger.tournaments(status or None, q or None, limit=size, before=after)

        return await kit.exported(
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
                pool_uid=integer(pool, "pool"),
                limit=LIST_PAGE,
                before=before or None,
            )
            return {**_holds(ledger, found), "rule": ledger.stale_rule()}

        return await kit.shown(
            request, session, "holds.html", listed, every_open=not stale, pool=pool or ""
        )

    @get("/holds.csv", include_in_schema=False)
    async def holds_csv(
        request: Request[Any, Any, Any],
        every_open: Annotated[str | None, QueryParameter(name="all")] = None,
        pool: Text = None,
    ) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            number = integer(pool, "pool")
            return ledger.holds(stale=not every_open, pool_uid=number, limit=size, before=after)

        return await kit.exported(
            request, "holds", read, views.HOLD_COLUMNS, all=every_open, pool=pool
        )

    return [bets, bets_csv, tournaments, tournaments_csv, holds, holds_csv]


def _verifier(kit: Kit) -> str | None:
    """This server's public key, from its signing key (``LEDGER_SIGNING_KEY``): what the bet
    page checks a proof's checkpoint signature with. None without one (or unreadable)."""
    key_file = kit.runtime.settings.signing_key
    if key_file is None:
        return None
    try:
        return verifier_of(Path(key_file).read_text(encoding="utf-8").strip())
    except (OSError, NoteError):
        return None
