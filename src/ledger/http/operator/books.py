"""Read-only views of the books under ``/admin``: a user's balances and statement, open holds,
the house, a bet, a tournament's report, and the journal's check."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.handlers import HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter

from ... import views
from ...errors import BetNotFound, UserNotFound
from ...paging import EXPORT_PAGE, Page
from ...service import Ledger, parse_instant
from ...views import Balance, HoldView, StatementLine
from ..openapi import operator_docs
from ..params import parse_id
from ..runtime import Runtime
from .exports import csv_format, csv_stream
from .trail import note

__all__ = ["books_handlers"]

UserId = Annotated[str, PathParameter(description="The user's uid on the operator side")]


def books_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The books' read routes, bound to ``runtime``."""

    @get(
        "/users/{uid:str}/balances",
        summary="A user's available and held balances, now or at a past moment",
        **operator_docs("request.invalid", "user.not_found"),
    )
    async def balances(
        uid: UserId,
        at: Annotated[
            str | None,
            QueryParameter(
                description="ISO 8601 moment with a zone (2026-11-20T00:00:00Z): the balances "
                "then, exactly"
            ),
        ] = None,
    ) -> dict[str, Any]:
        if at is not None:
            moment = parse_instant(at, "at")

            def read_at(ledger: Ledger) -> list[Balance]:
                ledger.require_user(uid)
                return ledger.balance_at(uid, moment)

            return views.balances_at_dict(uid, moment, await runtime.call(read_at))
        found = await runtime.call(lambda ledger: ledger.user(uid))
        if found is None:
            # Not an empty 200: an unknown user must not look like one with nothing.
            raise UserNotFound(f"user {uid} is unknown")
        return views.balances_dict(uid, found.balances or [])

    @get(
        "/users/{uid:str}/statement",
        summary="A user's movements, newest first, with the balance after each; paginated",
        **operator_docs("request.invalid", "request.invalid_cursor", "user.not_found"),
    )
    async def statement(
        uid: UserId,
        currency: Annotated[str | None, QueryParameter(description="Only this currency")] = None,
        limit: Annotated[int, QueryParameter(description="Page size", ge=1, le=10_000)] = 50,
        before: Annotated[
            str | None,
            QueryParameter(description="The previous page's next (or, older form, next_before)"),
        ] = None,
        format: Annotated[
            str, QueryParameter(description="json, or csv for every line (streamed)")
        ] = "json",
    ) -> Any:
        """Page through with ``before`` set to the previous page's ``next``;
        ``format=csv`` exports every line from ``before`` on, read a page at a time."""
        csv = csv_format(format)

        def read(ledger: Ledger) -> Page[StatementLine]:
            # The page first: a bad cursor is a 400 whoever the user is.
            page = ledger.statement_page(
                uid, currency, limit=EXPORT_PAGE if csv else limit, before=before
            )
            ledger.require_user(uid)
            return page

        page = await runtime.call(read)
        if csv:
            return csv_stream(
                runtime,
                page,
                lambda ledger, after: ledger.statement_page(
                    uid, currency, limit=EXPORT_PAGE, before=after
                ),
                views.STATEMENT_COLUMNS,
                f"statement-{uid}.csv",
            )
        return views.statement_dict(uid, page.items, page.next)

    @get(
        "/holds",
        summary="Open holds (placed bets not yet settled or refunded), oldest first",
        **operator_docs("request.invalid", "request.invalid_cursor"),
    )
    async def holds(
        stale: Annotated[
            bool, QueryParameter(description="Only the stale ones: the bets to chase")
        ] = False,
        user: Annotated[str | None, QueryParameter(description="Only this user's")] = None,
        pool: Annotated[str | None, QueryParameter(description="Only this tournament's")] = None,
        older_than: Annotated[
            str | None, QueryParameter(description="Placed longer ago than this: 2d, 12h, 90m")
        ] = None,
        limit: Annotated[int, QueryParameter(description="Page size", ge=1, le=1000)] = 50,
        before: Annotated[
            str | None, QueryParameter(description="The previous page's next")
        ] = None,
        format: Annotated[
            str, QueryParameter(description="json, or csv for every hold (streamed)")
        ] = "json",
    ) -> Any:
        csv = csv_format(format)
        pool_uid = None if pool is None else parse_id(pool, "pool")

        def read(ledger: Ledger, after: str | None, size: int) -> Page[HoldView]:
            return ledger.holds(
                stale=stale,
                user=user,
                pool_uid=pool_uid,
                older_than=older_than,
                limit=size,
                before=after,
            )

        page = await runtime.call(
            lambda ledger: read(ledger, before, EXPORT_PAGE if csv else limit)
        )
        if csv:
            return csv_stream(
                runtime,
                page,
                lambda ledger, after: read(ledger, after, EXPORT_PAGE),
                views.HOLD_COLUMNS,
                "holds.csv",
            )
        return views.holds_dict(page.items, page.next)

    @get(
        "/house",
        summary="The house accounts per currency, and a period's totals",
        **operator_docs("request.invalid"),
    )
    async def house(
        since: Annotated[
            str | None, QueryParameter(description="ISO 8601 with a zone; from (inclusive)")
        ] = None,
        until: Annotated[
            str | None, QueryParameter(description="ISO 8601 with a zone; until (exclusive)")
        ] = None,
        currency: Annotated[str | None, QueryParameter(description="Only this currency")] = None,
    ) -> dict[str, Any]:
        found = await runtime.call(lambda ledger: ledger.house(since, until, currency))
        return found.to_dict()

    @get(
        "/bets/{bet_uid:str}",
        summary="A bet as the ledger recorded it",
        **operator_docs("request.invalid", "bet.not_found"),
    )
    async def bet(bet_uid: Annotated[str, PathParameter(description="bet.uid")]) -> dict[str, Any]:
        uid = parse_id(bet_uid, "bet_uid")
        found = await runtime.call(lambda ledger: ledger.bet(uid))
        if found is None:
            raise BetNotFound(f"bet {uid} is unknown", bet_uid=uid)
        return found.to_dict()

    @get(
        "/tournaments/{pool_uid:str}/report",
        summary="A tournament's entries, stakes, payouts",
        **operator_docs("request.invalid"),
    )
    async def report(
        pool_uid: Annotated[str, PathParameter(description="pool.uid")],
    ) -> dict[str, Any]:
        uid = parse_id(pool_uid, "pool_uid")
        found = await runtime.call(lambda ledger: ledger.pool_report(uid))
        return found.to_dict()

    @get(
        "/check",
        summary="Verify the journal's invariants (500 when any fails)",
        **operator_docs("ledger.check_failed"),
    )
    async def check(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        """200 with ``ok: true`` when the books hold; 500 with the problems when they do not,
        so that a monitoring probe (``curl -f``) fails loudly."""
        found = await runtime.call(lambda ledger: ledger.check())
        body = views.check_dict(found)
        if not found.ok:
            note(request, error="ledger.check_failed")
            body["error"] = "ledger.check_failed"
            body["message"] = f"{len(found.problems)} invariant(s) violated"
        return Response(body, status_code=200 if found.ok else 500)

    return [balances, statement, holds, house, bet, report, check]
