"""The one composition root of the callback server: :func:`create_app`.

Nothing is built at import time; every app has its own runtime (ledger, worker limiter, metrics),
so tests can build as many differently configured apps as they need.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from litestar import Litestar

from ..service import Ledger
from ..settings import Settings
from .callbacks import callback_handlers
from .console import console_handlers, console_templates
from .errors import EXCEPTION_HANDLERS
from .openapi import openapi_assets, openapi_config
from .operator import operator_router
from .ops import ops_handlers
from .runtime import Runtime
from .webhooks import server_sender

__all__ = ["create_app"]


def _version() -> str:
    try:
        return version("ledger")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


def create_app(settings: Settings | None = None, *, ledger: Ledger | None = None) -> Litestar:
    """Build the callback server for ``settings``.

    The ledger is opened on start-up from ``settings.database_url``, unless one is passed in
    (tests, or an operator embedding the server in a process that already has one); a ledger
    passed in is not closed on shutdown.
    """
    settings = settings or Settings()
    runtime = Runtime(settings, ledger)
    senders = [sender] if (sender := server_sender(runtime)) else []
    route_handlers: list[Any] = [
        *callback_handlers(runtime),
        operator_router(runtime),
        *ops_handlers(runtime),
        openapi_assets(),
        *console_handlers(runtime),
    ]
    app = Litestar(
        route_handlers=route_handlers,
        exception_handlers=EXCEPTION_HANDLERS,
        template_config=console_templates(),
        on_startup=[runtime.startup, *(sender.start for sender in senders)],
        on_shutdown=[*(sender.stop for sender in senders), runtime.shutdown],
        # Litestar's 10 MB default is far too small for a settle of a million participants.
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi_config(
            title="ledger callback server",
            version=_version(),
            description=(
                "The wallet callbacks of a fantasy-sports platform (Place Bet, Refund Bet, "
                "Refund Tournament, Settle Bet) and the operator API. Callback bodies are read "
                "raw and parsed exactly: amounts are JSON numbers or decimal strings, never "
                "rounded, and unknown fields are ignored at every level. Every error is "
                '`{"error": key, "message": text}`; a 5xx means "re-send".'
            ),
        ),
        # The CLI configures logging; an embedding process keeps its own.
        logging_config=None,
        debug=False,
    )
    app.state.runtime = runtime
    return app
