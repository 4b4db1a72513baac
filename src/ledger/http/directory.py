"""The operator's directory under ``/admin``: tournaments, users and bets, as lists and records.

Every list answers ``{"<items>": [...], "next": <cursor or null>}``, newest first, and pages
with ``?before=<next>`` (:mod:`ledger.paging`); ``?format=csv`` streams the whole list as CSV
instead, page by page on a worker thread, so that no export sits in memory. An unknown user,
tournament or bet is a 404, never an empty 200.

The routes join the operator router (:func:`ledger.http.operator.operator_router`), behind its
guard and its log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter
from litestar.response import Stream

from ..errors import TournamentNotFound, UserNotFound
from ..paging import DEFAULT_LIMIT, EXPORT_PAGE, Page, csv_lines, every
from ..service import Ledger
from ..views import BET_COLUMNS, TOURNAMENT_COLUMNS, USER_COLUMNS
from .filenames import CSV, attachment
from .openapi import operator_docs
from .params import parse_id
from .runtime import Runtime

__all__ = ["directory_handlers"]

T = TypeVar("T")

Limit = Annotated[int, QueryParameter(description="Page size (1 to 1000)")]
Before = Annotated[str | None, QueryParameter(description="The previous page's `next` cursor")]
Format = Annotated[
    Literal["json", "csv"] | None,
    QueryParameter(name="format", description="`csv` streams every page as CSV"),
]


async def _listed(
    runtime: Runtime,
    name: str,
    read: Callable[[Ledger, str | None, int], Page[Any]],
    limit: int,
    before: str | None,
    export: str | None,
    columns: Sequence[str],
) -> Response[Any]:
    """One page as JSON, or (``export == "csv"``) the whole list from ``before`` on as CSV."""
    if export != "csv":
        page = await runtime.call(lambda ledger: read(ledger, before, limit))
        return Response({name: [item.to_dict() for item in page.items], "next": page.next})
    # The first page is read here: bad input is a 400 before the stream starts, not a cut one.
    first = await runtime.call(lambda ledger: read(ledger, before, EXPORT_PAGE))
    ledger = await runtime.call(lambda opened: opened)

    def pages(after: str | None) -> Page[Any]:
        return first if after is None else read(ledger, after, EXPORT_PAGE)

    # A sync iterator: Litestar pulls each chunk on a worker thread.
    rows = (item.to_dict() for item in every(pages))
    return Stream(
        csv_lines(rows, columns),
        media_type=CSV,
        headers={"Content-Disposition": attachment(f"{name}.csv")},
    )


def directory_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The directory's routes, bound to ``runtime``."""

    @get(
        "/tournaments",
        summary="Tournaments as the platform described them, newest first",
        **operator_docs("request.invalid", "request.invalid_cursor"),
    )
    async def tournaments(
        status: Annotated[
            str | None, QueryParameter(description="Only this last status seen")
        ] = None,
        q: Annotated[
            str | None,
            QueryParameter(description="Case-insensitive substring of the name or the uid"),
        ] = None,
        limit: Limit = DEFAULT_LIMIT,
        before: Before = None,
        format_: Format = None,
    ) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            return ledger.tournaments(status, q, limit=size, before=after)

        return await _listed(
            runtime, "tournaments", read, limit, before, format_, TOURNAMENT_COLUMNS
        )

    @get(
        "/tournaments/{uid:str}",
        summary="A tournament, with its report per currency",
        **operator_docs("request.invalid", "tournament.not_found"),
    )
    async def tournament(
        uid: Annotated[str, PathParameter(description="pool.uid")],
    ) -> dict[str, Any]:
        pool_uid = parse_id(uid, "pool uid")
        found = await runtime.call(lambda ledger: ledger.tournament(pool_uid))
        if found is None:
            raise TournamentNotFound(f"tournament {pool_uid} is unknown")
        return found.to_dict()

    @get(
        "/users",
        summary="Users as the platform described them, newest first",
        **operator_docs("request.invalid", "request.invalid_cursor"),
    )
    async def users(
        q: Annotated[
            str | None,
            QueryParameter(description="Case-insensitive substring of the uid or the name"),
        ] = None,
        limit: Limit = DEFAULT_LIMIT,
        before: Before = None,
        format_: Format = None,
    ) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            return ledger.users(q, limit=size, before=after)

        return await _listed(runtime, "users", read, limit, before, format_, USER_COLUMNS)

    @get(
        "/users/{uid:str}",
        summary="A user, with their balances",
        **operator_docs("request.invalid", "user.not_found"),
    )
    async def user(
        uid: Annotated[str, PathParameter(description="The user's uid on the operator side")],
    ) -> dict[str, Any]:
        found = await runtime.call(lambda ledger: ledger.user(uid))
        if found is None:
            raise UserNotFound(f"user {uid} is unknown")
        return found.to_dict()

    @get(
        "/bets",
        summary="Bets, highest uid first, by user, tournament and state",
        **operator_docs("request.invalid", "request.invalid_cursor"),
    )
    async def bets(
        user: Annotated[str | None, QueryParameter(description="Only this user's")] = None,
        pool: Annotated[int | None, QueryParameter(description="Only this tournament's")] = None,
        # Named state_ in Python: Litestar reserves "state" for the application state.
        state_: Annotated[
            Literal["placed", "refunded", "settled"] | None,
            QueryParameter(name="state", description="Only bets in this state"),
        ] = None,
        limit: Limit = DEFAULT_LIMIT,
        before: Before = None,
        format_: Format = None,
    ) -> Response[Any]:
        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            return ledger.bets(user, pool, state_, limit=size, before=after)

        return await _listed(runtime, "bets", read, limit, before, format_, BET_COLUMNS)

    return [tournaments, tournament, users, user, bets]
