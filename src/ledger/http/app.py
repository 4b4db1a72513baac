"""The one composition root of the callback server: :func:`create_app`.

Nothing is built at import time; every app has its own runtime (ledger, worker limiter, metrics),
so tests can build as many differently configured apps as they need.
"""

from __future__ import annotations

from concurrent.futures import Future
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from litestar import Litestar
from litestar.types import ASGIApp

from ..service import Ledger
from ..settings import Settings
from .callbacks import callback_handlers, callback_routes
from .checkpointing import CheckpointSigner
from .console import console_handlers, console_templates
from .errors import EXCEPTION_HANDLERS
from .openapi import openapi_assets, openapi_config
from .operator import operator_router
from .ops import ops_handlers
from .runtime import Runtime
from .slashes import route_encoded_slashes
from .surfaces import Surfaces

__all__ = ["create_app"]


def _version() -> str:
    try:
        return version("ledger")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


class _App(Litestar):
    """Litestar, with the platform's callbacks served before its router.

    A Place Bet is the one request that comes thousands of times a second, and on its way to the
    handler Litestar's router, exception middleware, request object and response handling were
    a tenth of the event loop's time per Place Bet (10 to 12 of 98 to 103 CPU us, ``run.py``):
    a POST to a callback's exact path goes straight to its ASGI app instead. Everything else, a
    callback path with a trailing slash or another method included, goes through Litestar, to
    the same delivery code (``ledger.http.callbacks``); errors render through the same table.
    """

    callbacks: dict[str, ASGIApp]
    surfaces: Surfaces | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # Which listener serves which surface (LEDGER_OPERATOR_LISTEN), and the operator
        # side's allowlist: checked before any route, the callbacks' included.
        # A user uid with "/" in it, written %2F, routed as one path segment (.slashes).
        if scope["type"] == "http" and scope["path"].startswith("/admin/users/"):
            route_encoded_slashes(scope)
        surfaces = self.surfaces
        if (
            surfaces is not None
            and scope["type"] == "http"
            and not await surfaces.admit(scope, send)
        ):
            return
        if scope["type"] == "http" and scope["method"] == "POST":
            route = self.callbacks.get(scope["path"])
            if route is not None:
                # What Litestar's own entry sets, for the error path's request object.
                scope["app"] = scope["litestar_app"] = self
                scope.setdefault("state", {})
                await route(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    settings: Settings | None = None,
    *,
    ledger: Ledger | None = None,
    opening: Future[Ledger] | None = None,
) -> Litestar:
    """Build the callback server for ``settings``.

    The ledger is opened on start-up from ``settings.database_url``, unless one is passed in
    (tests, or an operator embedding the server in a process that already has one); a ledger
    passed in is not closed on shutdown. ``opening`` is the app's own ledger being opened
    already, on another thread (``ledger serve`` starts it while it imports and builds the app):
    start-up takes it when it is done, and shutdown closes it.
    """
    settings = settings or Settings()
    runtime = Runtime(settings, ledger, opening=opening)
    senders = []
    if settings.webhooks is not None:
        # httpx and the sender only for a server that sends: the rest of start-up goes without.
        from .webhooks import server_sender

        senders = [sender] if (sender := server_sender(runtime)) else []
    # Signed checkpoints of the journal, with a signing key (docs/integrity.md).
    key = settings.signing_key
    signers = [CheckpointSigner(runtime, key)] if key is not None else []
    route_handlers: list[Any] = [
        *callback_handlers(runtime),
        operator_router(runtime),
        *ops_handlers(runtime),
        openapi_assets(),
        *console_handlers(runtime),
    ]
    app = _App(
        route_handlers=route_handlers,
        exception_handlers=EXCEPTION_HANDLERS,
        template_config=console_templates(),
        on_startup=[
            runtime.startup,
            *(sender.start for sender in senders),
            *(signer.start for signer in signers),
        ],
        on_shutdown=[
            *(signer.stop for signer in signers),
            *(sender.stop for sender in senders),
            runtime.shutdown,
        ],
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
    app.callbacks = callback_routes(runtime)
    app.surfaces = Surfaces.of(settings, list(app.callbacks))
    return app
