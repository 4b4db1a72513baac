"""The console's users: the list with each user's balances, one user's page (balances now and
at a chosen moment, statement, bets), the cashier's deposit and withdrawal, and their exports.

A deposit or withdrawal answers with the user's page as it is once the movement is written, so
the balances and the statement the cashier reads beside "applied" are the new ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.params import QueryParameter
from litestar.response import Template

from ... import views
from ...errors import InvalidRequest, LedgerError, UserNotFound
from ...operators import Operators
from ...paging import Page, csv_lines
from ...service import Ledger
from .formats import utc_field
from .kit import LIST_PAGE, Kit, csv_stream

__all__ = [
    "BALANCE_AT_COLUMNS",
    "USER_LIST_COLUMNS",
    "known_currencies",
    "user_page",
    "users_handlers",
]

Text = Annotated[str | None, QueryParameter()]

# The users' export: the directory's columns and each user's balances (JSON text in one cell).
USER_LIST_COLUMNS = (*views.USER_COLUMNS, "balances")
BALANCE_AT_COLUMNS = ("user", "at", "currency", "available", "held")


def known_currencies(ledger: Ledger, *also: str) -> list[str]:
    """The currencies the ledger holds money in (every one has a house account), and ``also``:
    the choices of a currency field."""
    house = Operators(ledger.store).tables.house_accounts()
    return sorted({currency for _, currency, _ in house} | set(also))


def _with_balances(ledger: Ledger, found: Page[Any]) -> list[dict[str, Any]]:
    """A page of users, each with their balances (one short read per user of the page)."""
    rows = []
    for item in found.items:
        row = item.to_dict()
        row["balances"] = [balance.to_dict() for balance in ledger.balance(item.uid)]
        rows.append(row)
    return rows


def user_page(
    ledger: Ledger, uid: str, before: str | None, bets_before: str | None, at: str | None
) -> dict[str, Any]:
    """Everything the user's page shows; ``at``: the moment of the balances asked for."""
    found = ledger.user(uid)
    if found is None:
        raise UserNotFound(f"user {uid} is unknown")
    statement = ledger.statement_page(uid, limit=LIST_PAGE, before=before or None)
    bets = ledger.bets(uid, limit=LIST_PAGE, before=bets_before or None, by_time=True)
    balances = found.to_dict().get("balances", [])
    moment = utc_field(at, "at")
    then = None if moment is None else [item.to_dict() for item in ledger.balance_at(uid, moment)]
    names = ledger.tournament_names(bet.pool_uid for bet in bets.items)
    return {
        "user": found.to_dict(),
        "balances": balances,
        "lines": [line.to_dict() for line in statement.items],
        "next": statement.next,
        "bets": [bet.to_dict() for bet in bets.items],
        "bets_next": bets.next,
        "pool_names": names,
        "at": moment,
        "balances_then": then,
        "currencies": known_currencies(ledger, *(item["currency"] for item in balances)),
        # Changed through ledger.http.console.player_limits (a cashier or an admin).
        "limits": [view.to_dict() for view in ledger.limits(uid)],
        "exclusions": [view.to_dict() for view in ledger.exclusions(uid)],
    }


def users_handlers(kit: Kit) -> list[Any]:
    """The users' pages, the movement form's answer and the users' exports."""

    @get("/users", include_in_schema=False)
    async def users(
        request: Request[Any, Any, Any],
        uid: Text = None,
        q: Text = None,
        before: Text = None,
        bets_before: Text = None,
        at: Text = None,
    ) -> Template:
        """The users found by uid or name, with their balances, or one user's page."""
        session = await kit.signed_in(request)
        try:
            if not uid:

                def listed(ledger: Ledger) -> dict[str, Any]:
                    found = ledger.users(q or None, limit=LIST_PAGE, before=before or None)
                    return {"users": _with_balances(ledger, found), "next": found.next}

                found = await kit.call(listed)
                return kit.page(request, session, "users.html", q=q or "", uid=None, **found)
            chosen = uid
            found = await kit.call(
                lambda ledger: user_page(ledger, chosen, before, bets_before, at)
            )
        except LedgerError as error:
            return kit.failed(request, session, error, q=q or uid or "")
        # htmx asking for older statement lines gets only the rows.
        partial = "_statement_rows.html" if before else None
        return kit.page(request, session, "users.html", partial=partial, uid=uid, q="", **found)

    @post("/users/movements", include_in_schema=False)
    async def movement(request: Request[Any, Any, Any]) -> Response[Any]:
        session = await kit.signed_in(request)
        form = await kit.form_of(request, session)
        kind = form.get("kind", "")
        user, reference = form.get("uid", ""), form.get("reference", "").strip()
        currency, amount = form.get("currency", "").strip().upper(), form.get("amount", "").strip()
        action = kind if kind in ("deposit", "withdrawal") else "deposit"
        note = {"currency": currency, "amount": amount, "reference": reference}
        try:
            if kind not in ("deposit", "withdrawal"):
                raise InvalidRequest("kind must be deposit or withdrawal")
            session.require("move")
            if not reference:
                # The reference is what makes a double click land once.
                raise InvalidRequest("a reference is required", key="reference.missing")
            move = await kit.call(
                lambda ledger: (ledger.deposit if kind == "deposit" else ledger.withdraw)(
                    user, currency, amount, reference
                )
            )
        except LedgerError as error:
            await kit.call(kit.audit(request, session, action, user, outcome=error.key, **note))
            return kit.beside(request, session, error, "#movement-result")
        # The amount as the ledger applied it (exact, at the currency's scale), not as typed.
        note["amount"] = move.to_dict()["amount"]
        await kit.call(kit.audit(request, session, action, user, applied=move.applied, **note))
        found = await kit.call(lambda ledger: user_page(ledger, user, None, None, None))
        return kit.page(
            request,
            session,
            "users.html",
            partial="_user.html",
            uid=user,
            q="",
            kind=kind,
            movement=move.to_dict(),
            **found,
        )

    @get("/users.csv", include_in_schema=False)
    async def users_csv(request: Request[Any, Any, Any], q: Text = None) -> Response[Any]:
        session = await kit.signed_in(request)
        try:
            ledger = await kit.call(lambda opened: opened)
            # The first page here: bad input is a 400 before the stream starts.
            first = await kit.call(
                lambda opened: opened.users(q or None, limit=kit.export_page, before=None)
            )
        except LedgerError as error:
            await kit.call(kit.audit(request, session, "export", "users", outcome=error.key))
            return kit.failed(request, session, error)
        await kit.call(kit.audit(request, session, "export", "users", **({"q": q} if q else {})))

        def rows() -> Iterator[dict[str, Any]]:
            found: Page[Any] | None = first
            while found is not None:
                yield from _with_balances(ledger, found)
                after = found.next
                found = (
                    None
                    if after is None
                    else ledger.users(q or None, limit=kit.export_page, before=after)
                )

        return csv_stream("users", csv_lines(rows(), USER_LIST_COLUMNS))

    @get("/statement.csv", include_in_schema=False)
    async def statement_csv(request: Request[Any, Any, Any], uid: Text = None) -> Response[Any]:
        user = uid or ""

        def read(ledger: Ledger, after: str | None, size: int) -> Page[Any]:
            if after is None:
                ledger.require_user(user)
            return ledger.statement_page(user, limit=size, before=after)

        return await kit.exported(request, "statement", read, views.STATEMENT_COLUMNS, uid=uid)

    @get("/balances.csv", include_in_schema=False)
    async def balances_csv(
        request: Request[Any, Any, Any], uid: Text = None, at: Text = None
    ) -> Response[Any]:
        """The user's balances at a moment (now, without one), one line per currency."""
        session = await kit.signed_in(request)
        user = uid or ""

        def read(ledger: Ledger) -> list[dict[str, Any]]:
            ledger.require_user(user)
            moment = utc_field(at, "at")
            found = ledger.balance(user) if moment is None else ledger.balance_at(user, moment)
            stamp = moment or "now"
            return [{"user": user, "at": stamp, **item.to_dict()} for item in found]

        chosen = {"uid": user, **({"at": at} if at else {})}
        try:
            rows = await kit.call(read)
        except LedgerError as error:
            await kit.call(kit.audit(request, session, "export", "balances", outcome=error.key))
            return kit.failed(request, session, error)
        await kit.call(kit.audit(request, session, "export", "balances", **chosen))
        return csv_stream("balances", csv_lines(rows, BALANCE_AT_COLUMNS))

    return [users, movement, users_csv, statement_csv, balances_csv]
