"""The slow part of ``ledger serve``: the app, its ledger and writer, on uvicorn.

:mod:`ledger.http.serve` imports this module only once its checks have passed (the port free,
the TLS files readable, the settings valid), so that a refusal costs none of the imports below.
It runs the app on uvicorn with uvloop and httptools (``uvicorn[standard]``); with ``workers``
above one, that many processes share the port under uvicorn's supervisor, each with its own app,
ledger and writer (the database keeps them correct, as it keeps separate replicas).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import ssl
from concurrent.futures import Future
from functools import partial
from typing import Any

import uvicorn
from litestar import Litestar
from uvicorn.supervisors import Multiprocess

from .._process import freeze_heap
from ..errors import StoreUnavailable
from ..service import Ledger, open_ledger
from ..settings import Settings
from .app import create_app
from .logs import configure_logging
from .protocol import OneWriteHttpToolsProtocol

__all__ = ["run", "served_app"]

# Seconds a worker may take to answer the supervisor's health check before it is replaced.
WORKER_HEALTHCHECK_TIMEOUT = 30.0


class _Config(uvicorn.Config):
    """uvicorn's config with a TLS floor: its own options set no minimum version.

    At module level because ``--workers`` pickles it into each worker process.
    """

    def __init__(self, app: Any, *, tls_minimum: ssl.TLSVersion, **options: Any) -> None:
        super().__init__(app, **options)
        self.tls_minimum = tls_minimum

    def load(self) -> None:
        super().load()
        if self.ssl is not None:
            self.ssl.minimum_version = self.tls_minimum


def _uvicorn_config(app: Any, settings: Settings, **options: Any) -> Any:
    minimum = (
        ssl.TLSVersion.TLSv1_3 if settings.tls_min_version == "1.3" else ssl.TLSVersion.TLSv1_2
    )
    return _Config(app, tls_minimum=minimum, **options)


def _worker_app(settings: Settings) -> Any:
    """The app of one ``--workers`` process, built in it: its own ledger, writer and metrics.

    Runs in a freshly spawned interpreter, so logging is configured again here; and the worker
    dies with the supervising process, so that a supervisor killed outright (SIGKILL, OOM)
    leaves no orphan holding the port against its restart.
    """
    _die_with_parent()
    configure_logging(settings.log_level)
    return served_app(settings)


def served_app(settings: Settings, opening: Future[Ledger] | None = None) -> Litestar:
    """The app as ``ledger serve`` runs it: it owns its process, so once started (its ledger
    open) it freezes the heap it built (:func:`ledger._process.freeze_heap`). ``opening``: its
    ledger, being opened already (see :func:`ledger.http.app.create_app`)."""
    app = create_app(settings, opening=opening)
    app.on_startup.append(freeze_heap)
    return app


# prctl(2) option: the signal this process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):  # Linux only; elsewhere, best effort
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def _prepare_database(settings: Settings) -> None:
    """Open and close the ledger once before starting workers: a new SQLite file is created and
    migrated here, not by several workers racing to do it. A database that is down now is left
    to the workers, which retry on each request as a single server does."""
    try:
        open_ledger(
            settings.database_url, currencies=settings.currencies, **settings.ledger_options()
        ).close()
    except StoreUnavailable as exc:
        logging.getLogger("ledger.server").warning(
            "database not available at start-up, the workers will retry: %s", exc.message
        )


def run(
    settings: Settings,
    *,
    host: str,
    port: int,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    workers: int,
    opening: Future[Ledger] | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully and return.

    uvicorn raises the signal it caught again once it has shut down, so that the process ends
    as that signal would have ended it; a Ctrl-C is the operator's way of stopping the server,
    not a failure, so it ends here and ``ledger serve`` exits 0.
    """
    if workers > 1:
        _prepare_database(settings)
    config = _uvicorn_config(
        # Several workers: each process builds its own app (and opens its own ledger) from a
        # picklable factory; uvicorn's supervisor binds the socket once and hands it to all.
        partial(_worker_app, settings) if workers > 1 else served_app(settings, opening),
        settings,
        factory=workers > 1,
        workers=workers,
        # A new worker answers the supervisor's health check only once it has imported
        # everything, which takes seconds on a loaded machine: uvicorn's 5 s killed them.
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_TIMEOUT,
        host=host,
        port=port,
        # "auto" picks uvloop, installed with uvicorn[standard] as httptools is; uvicorn's
        # httptools protocol, with each answer's head and body in one write (.protocol).
        loop="auto",
        http=OneWriteHttpToolsProtocol,
        # The app reads X-Forwarded-For itself, from LEDGER_TRUSTED_PROXIES only; uvicorn's own
        # handling would trust 127.0.0.1 by default and rewrite the peer address behind our back.
        proxy_headers=False,
        server_header=False,
        # One JSON line per delivery is logged by the app; an access log would double it.
        access_log=False,
        log_config=None,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        # SIGTERM: stop accepting, let deliveries in flight finish and be answered (a large
        # settle may take a while), then exit; bounded by LEDGER_SHUTDOWN_TIMEOUT.
        timeout_graceful_shutdown=settings.shutdown_timeout,
    )
    if settings.operator_listen is None:
        sockets = None
    else:
        # The operator's side on an address of its own (ledger.http.surfaces): the same app
        # serves both sockets and tells them apart by the address a request arrived on.
        operator_host, operator_port = settings.operator_listen
        operator = _uvicorn_config(None, settings, host=operator_host, port=operator_port)
        sockets = [config.bind_socket(), operator.bind_socket()]
    with contextlib.suppress(KeyboardInterrupt):
        if workers > 1:
            # SIGTERM or SIGINT to the supervisor reaches every worker, and each shuts down
            # gracefully as a single server does; a worker that dies is replaced.
            Multiprocess(config, sockets=sockets or [config.bind_socket()]).run()
        elif sockets is None:
            uvicorn.Server(config).run()
        else:
            uvicorn.Server(config).run(sockets=sockets)
