"""Money in and out: ``POST /admin/deposits`` and ``POST /admin/withdrawals``.

Amounts in request bodies are parsed exactly (:func:`ledger.contract.parse_json`), whether sent
as JSON numbers or decimal strings, and answered as decimal strings. The reference is required:
it is what makes a retried deposit land once.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, post
from litestar.handlers import HTTPRouteHandler

from ...contract import parse_json
from ...errors import InvalidRequest, LimitReached, UserExcluded
from ...storable import storable
from ...views import Movement
from ..callbacks import require_json
from ..openapi import operator_docs
from ..runtime import Runtime
from .trail import note

__all__ = ["movement_handlers"]


def movement_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The deposit and withdrawal routes, bound to ``runtime``."""

    @post(
        "/deposits",
        status_code=200,
        summary="Credit a user from outside (idempotent; refused past a deposit limit)",
        **operator_docs("user.deposit_limit_reached", "user.excluded", movement=True),
    )
    async def deposit(request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        user, currency, amount, reference = _movement(await request.body())
        note(request, user=user, currency=currency, amount=amount, reference=reference)
        # Its event carries the caller's X-Request-Id, like a callback's.
        request_id = _request_id(request)
        try:
            movement = await runtime.call(
                lambda ledger: ledger.deposit(
                    user, currency, amount, reference, request_id=request_id
                )
            )
        except (LimitReached, UserExcluded) as refused:
            runtime.metrics.limit_refused(refused.key)
            raise
        return _answer(request, movement)

    @post(
        "/withdrawals",
        status_code=200,
        summary="Pay a user out (idempotent, no overdraft)",
        **operator_docs(movement=True, funds=True),
    )
    async def withdrawal(request: Request[Any, Any, Any]) -> dict[str, Any]:
        require_json(request.headers.get("content-type"))
        user, currency, amount, reference = _movement(await request.body())
        note(request, user=user, currency=currency, amount=amount, reference=reference)
        # Its event carries the caller's X-Request-Id, like a callback's.
        request_id = _request_id(request)
        movement = await runtime.call(
            lambda ledger: ledger.withdraw(user, currency, amount, reference, request_id=request_id)
        )
        return _answer(request, movement)

    return [deposit, withdrawal]


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


def _answer(request: Request[Any, Any, Any], movement: Movement) -> dict[str, Any]:
    answer = movement.to_dict()
    note(request, **answer)
    return answer


def _request_id(request: Request[Any, Any, Any]) -> str | None:
    """The caller's X-Request-Id as its event keeps it: up to the column's 255 characters."""
    found = request.headers.get("x-request-id")
    return None if found is None else storable(found[:255])
