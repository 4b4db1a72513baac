"""The operator API under ``/admin``: money in and out, and read-only views of the books.

It has its own bearer token (``LEDGER_OPERATOR_TOKEN``), checked by a guard on the whole router in
constant time. With no token configured the API answers 403 ``operator.disabled``: an unprotected
deposit endpoint would be a money printer.

Amounts in request bodies are parsed exactly (:func:`ledger.contract.parse_json`), whether sent
as JSON numbers or decimal strings, and answered as decimal strings.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, Router, get, post
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter

from .. import views
from ..contract import check_id, parse_json
from ..errors import BetNotFound, InvalidRequest
from ..service import Ledger
from ..views import StatementLine
from .auth import check_operator
from .callbacks import require_json
from .runtime import Runtime

__all__ = ["operator_router"]

UserId = Annotated[str, PathParameter(description="The user's uid on the operator side")]


def operator_router(runtime: Runtime) -> Router:
    """The ``/admin`` router, bound to ``runtime``."""

    def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        check_operator(connection.headers.get("authorization"), runtime.settings)

    @post("/deposits", status_code=200, summary="Credit a user from outside (idempotent)")
    async def deposit(request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        user, currency, amount, reference = _movement(await request.body())
        movement = await runtime.call(
            lambda ledger: ledger.deposit(user, currency, amount, reference)
        )
        return movement.to_dict()

    @post("/withdrawals", status_code=200, summary="Pay a user out (idempotent, no overdraft)")
    async def withdrawal(request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        user, currency, amount, reference = _movement(await request.body())
        movement = await runtime.call(
            lambda ledger: ledger.withdraw(user, currency, amount, reference)
        )
        return movement.to_dict()

    @get("/users/{uid:str}/balances", summary="A user's available and held balances")
    async def balances(uid: UserId) -> dict[str, Any]:
        found = await runtime.call(lambda ledger: ledger.balance(uid))
        return views.balances_dict(uid, found)

    @get("/users/{uid:str}/statement", summary="A user's movements, newest first, paginated")
    async def statement(
        uid: UserId,
        currency: Annotated[str | None, QueryParameter(description="Only this currency")] = None,
        limit: Annotated[int, QueryParameter(description="Page size", ge=1, le=10_000)] = 50,
        before: Annotated[
            int | None, QueryParameter(description="The previous page's next_before")
        ] = None,
    ) -> dict[str, Any]:
        """Page through with ``before`` set to the previous page's ``next_before``."""
        if before is not None:
            check_id(before, "before")

        def read(ledger: Ledger) -> list[StatementLine]:
            return ledger.statement(uid, currency, limit=limit, before=before)

        lines = await runtime.call(read)
        return views.statement_dict(uid, lines, views.next_before(lines, limit))

    @get("/bets/{bet_uid:str}", summary="A bet as the ledger recorded it")
    async def bet(bet_uid: Annotated[str, PathParameter(description="bet.uid")]) -> dict[str, Any]:
        uid = _parse_id(bet_uid, "bet_uid")
        found = await runtime.call(lambda ledger: ledger.bet(uid))
        if found is None:
            raise BetNotFound(f"bet {uid} is unknown", bet_uid=uid)
        return found.to_dict()

    @get("/tournaments/{pool_uid:str}/report", summary="A tournament's entries, stakes, payouts")
    async def report(
        pool_uid: Annotated[str, PathParameter(description="pool.uid")],
    ) -> dict[str, Any]:
        uid = _parse_id(pool_uid, "pool_uid")
        found = await runtime.call(lambda ledger: ledger.pool_report(uid))
        return found.to_dict()

    @get("/check", summary="Verify the journal's invariants (500 when any fails)")
    async def check() -> Response[dict[str, Any]]:
        """200 with ``ok: true`` when the books hold; 500 with the problems when they do not,
        so that a monitoring probe (``curl -f``) fails loudly."""
        found = await runtime.call(lambda ledger: ledger.check())
        body = views.check_dict(found)
        if not found.ok:
            body["error"] = "ledger.check_failed"
            body["message"] = f"{len(found.problems)} invariant(s) violated"
        return Response(body, status_code=200 if found.ok else 500)

    handlers: list[HTTPRouteHandler] = [
        deposit,
        withdrawal,
        balances,
        statement,
        bet,
        report,
        check,
    ]
    return Router(path="/admin", route_handlers=handlers, guards=[guard], tags=["operator"])


def _movement(body: bytes) -> tuple[str, str, Any, str]:
    data = parse_json(body)
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    missing = [name for name in ("user", "currency", "amount", "reference") if name not in data]
    if missing:
        # The reference is required: it is what makes a retried deposit land once.
        raise InvalidRequest(f"missing field(s): {', '.join(missing)}")
    for name in ("user", "currency", "reference"):
        if not isinstance(data[name], str):
            raise InvalidRequest(f"{name}: expected a string")
    return data["user"], data["currency"], data["amount"], data["reference"]


def _parse_id(text: str, name: str) -> int:
    # A path segment is text; the id rule itself (64 bits, a 400 beyond) is the contract's.
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest(f"{name}: expected an integer, got {text!r}") from None
    return check_id(value, name)
