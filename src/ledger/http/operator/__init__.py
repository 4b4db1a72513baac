"""The operator API under ``/admin``: money in and out, and read-only views of the books.

It has its own bearer token (``LEDGER_OPERATOR_TOKEN``), checked by a guard on the whole router in
constant time. With no token configured the API answers 403 ``operator.disabled``: an unprotected
deposit endpoint would be a money printer.

One module per resource: :mod:`.movements` (deposits, withdrawals), :mod:`.books` (balances,
statements, holds, the house, bets, reports, the check), :mod:`.deliveries`, :mod:`.audit`,
:mod:`.reconciliations`, :mod:`.player_limits` (responsible-gambling limits and
exclusions), :mod:`.journal` (checkpoints, a bet's proof); CSV exports in :mod:`.exports`; and
:mod:`.trail`, the log line (and audit entry) every request leaves. The directory, the event
feed and the webhooks' status join the same router from their own modules.
"""

from __future__ import annotations

from typing import Any

from litestar import Router
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler

from ..auth import check_operator
from ..directory import directory_handlers
from ..events import events_handler
from ..openapi import OPERATOR_SECURITY
from ..runtime import Runtime
from .audit import audit_handler
from .books import books_handlers
from .deliveries import deliveries_handler
from .journal import journal_handlers
from .movements import movement_handlers
from .player_limits import player_limit_handlers
from .reconciliations import reconciliations_handler
from .trail import operator_log
from .webhooks import webhook_handlers

__all__ = ["operator_router"]


def operator_router(runtime: Runtime) -> Router:
    """The ``/admin`` router, bound to ``runtime``."""

    def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        check_operator(connection.headers.get("authorization"), runtime.settings)

    handlers: list[HTTPRouteHandler] = [
        audit_handler(runtime),
        *movement_handlers(runtime),
        *player_limit_handlers(runtime),
        *books_handlers(runtime),
        reconciliations_handler(runtime),
        deliveries_handler(runtime),
        events_handler(runtime),
        *directory_handlers(runtime),
        *webhook_handlers(runtime),
        *journal_handlers(runtime),
    ]
    return Router(
        path="/admin",
        route_handlers=handlers,
        guards=[guard],
        # Outside the guard: refused requests (401, 403) are logged too.
        middleware=[operator_log(runtime)],
        security=OPERATOR_SECURITY,
        tags=["operator"],
    )
