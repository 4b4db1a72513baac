"""A player's responsible-gambling limits and exclusions under ``/admin/users/{uid}``.

``PUT .../limits`` sets one (a first or lower limit at once, a higher one after the cooling-off,
answered with its ``pending`` change and ``effective_at``), ``DELETE
.../limits/{kind}/{period}?currency=EUR`` removes one (after the cooling-off), ``GET
.../limits`` shows them with their use and room; ``POST .../exclusions`` excludes the user
(``until`` an ISO 8601 instant, or ``null``: indefinite), ``GET .../exclusions`` lists them;
only ``POST .../exclusions/lift`` with a ``reason`` and who (``by``) ends one early.

The operator's systems relay the player's own choices here: ``by`` in the body says who asked
(``"user"`` when the player did; an operator's name otherwise; default ``"operator"``). Every
change is audited like other operator writes (:mod:`.trail`).
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, delete, get, post, put
from litestar.handlers import HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter

from ...contract import parse_json
from ...errors import InvalidRequest
from ...service import parse_instant
from ..callbacks import require_json
from ..openapi import operator_docs
from ..runtime import Runtime
from .trail import note

__all__ = ["player_limit_handlers"]

UserId = Annotated[str, PathParameter(description="The user's uid on the operator side")]

_INPUT = ("request.malformed_json", "request.invalid", "amount.invalid", "currency.unknown")


def player_limit_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The limits' and exclusions' routes, bound to ``runtime``."""

    @put(
        "/users/{uid:str}/limits",
        status_code=200,
        summary="Set a deposit, stake or loss limit per day, week or month",
        **operator_docs(*_INPUT),
    )
    async def set_limit(uid: UserId, request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        body = _object(await request.body())
        fields = {name: _text(body, name) for name in ("currency", "kind", "period")}
        if "amount" not in body:
            raise InvalidRequest("missing field(s): amount")
        amount, by = body["amount"], _by(body)
        note(request, user=uid, amount=amount, by=by, **fields)
        view = await runtime.call(
            lambda ledger: ledger.set_limit(
                uid, fields["currency"], fields["kind"], fields["period"], amount, by=by
            )
        )
        return _limit_answer(uid, view.to_dict())

    @delete(
        "/users/{uid:str}/limits/{kind:str}/{period:str}",
        status_code=200,
        summary="Remove a limit (it stays in force through the cooling-off)",
        **operator_docs(*_INPUT),
    )
    async def remove_limit(
        uid: UserId,
        kind: Annotated[str, PathParameter(description="deposit, stake or loss")],
        period: Annotated[str, PathParameter(description="day, week or month")],
        currency: Annotated[str, QueryParameter(description="The limit's currency")],
        request: Request[Any, Any, Any],
    ) -> dict[str, Any]:
        by = request.query_params.get("by") or "operator"
        note(request, user=uid, currency=currency, kind=kind, period=period, by=by)
        view = await runtime.call(
            lambda ledger: ledger.remove_limit(uid, currency, kind, period, by=by)
        )
        return _limit_answer(uid, view.to_dict())

    @get(
        "/users/{uid:str}/limits",
        summary="A user's limits, each with its use in the window, room left, pending change",
        **operator_docs("request.invalid"),
    )
    async def limits(uid: UserId) -> dict[str, Any]:
        found = await runtime.call(lambda ledger: ledger.limits(uid))
        return {"user": uid, "limits": [view.to_dict() for view in found]}

    @post(
        "/users/{uid:str}/exclusions",
        status_code=200,
        summary="Exclude a user until an instant (a time-out) or indefinitely",
        **operator_docs("request.malformed_json", "request.invalid"),
    )
    async def exclude(uid: UserId, request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        body = _object(await request.body())
        reason, by = _text(body, "reason"), _by(body)
        if "until" not in body:
            raise InvalidRequest("missing field(s): until (an ISO 8601 instant, or null)")
        until_text = body["until"]
        if until_text is not None and not isinstance(until_text, str):
            raise InvalidRequest("until: expected an ISO 8601 instant or null")
        until = None if until_text is None else parse_instant(until_text, "until")
        note(request, user=uid, until=until_text, reason=reason, by=by)
        view = await runtime.call(lambda ledger: ledger.exclude(uid, until, reason=reason, by=by))
        return {"user": uid, **view.to_dict()}

    @post(
        "/users/{uid:str}/exclusions/lift",
        status_code=200,
        summary="End a user's exclusion early: an administrator's act, with a reason",
        **operator_docs("request.malformed_json", "request.invalid"),
    )
    async def lift(uid: UserId, request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        body = _object(await request.body())
        reason, by = _text(body, "reason"), _text(body, "by")
        note(request, user=uid, reason=reason, by=by)
        ended = await runtime.call(lambda ledger: ledger.lift_exclusion(uid, reason=reason, by=by))
        return {"user": uid, "ended": ended}

    @get(
        "/users/{uid:str}/exclusions",
        summary="A user's exclusions, oldest first, each saying whether it is in force",
        **operator_docs("request.invalid"),
    )
    async def exclusions(uid: UserId) -> dict[str, Any]:
        found = await runtime.call(lambda ledger: ledger.exclusions(uid))
        return {"user": uid, "exclusions": [view.to_dict() for view in found]}

    return [set_limit, remove_limit, limits, exclude, lift, exclusions]


def _object(body: bytes) -> dict[str, Any]:
    data = parse_json(body)
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return data


def _text(body: dict[str, Any], name: str) -> str:
    if name not in body:
        raise InvalidRequest(f"missing field(s): {name}")
    value = body[name]
    if not isinstance(value, str):
        raise InvalidRequest(f"{name}: expected a string")
    return value


def _by(body: dict[str, Any]) -> str:
    value = body.get("by", "operator")
    if not isinstance(value, str):
        raise InvalidRequest("by: expected a string")
    return value


def _limit_answer(uid: str, view: dict[str, Any]) -> dict[str, Any]:
    pending = view.get("pending")
    effective_at = None if pending is None else pending["effective_at"]
    return {"user": uid, **view, "effective_at": effective_at}
