"""The ``ledger serve`` and ``ledger token`` commands (registered by :mod:`ledger.cli`).

``serve`` runs the app on uvicorn with uvloop and httptools (``uvicorn[standard]``); with
``--workers N``, N processes share the port under uvicorn's supervisor, each with its own app,
ledger and writer (the database keeps them correct, as it keeps separate replicas). Without
``LEDGER_JWT_SECRET`` it runs in development mode, and only on a loopback address: it generates a
secret and an operator token for this run and prints ready-to-paste ``curl`` commands. Anywhere
else it refuses to start, because a wallet that accepts any caller pays anyone.

Refusals raise :class:`~ledger.errors.LedgerError`, which the ``ledger`` group prints as
``error: <key>: <message>`` (exit 1), like every other command's.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import json
import logging
import os
import secrets
import shlex
import signal
import ssl
import time
from dataclasses import replace
from functools import partial
from typing import Any

import click
import uvicorn
from litestar import Litestar
from uvicorn.supervisors import Multiprocess

from .._process import freeze_heap
from ..errors import LedgerError, StoreUnavailable
from ..logformat import plain_handler
from ..service import open_ledger
from ..settings import Settings, SettingsError
from .app import create_app
from .auth import mint_token
from .logs import JSON_LOGGERS, JsonLinesHandler
from .protocol import OneWriteHttpToolsProtocol

__all__ = ["COMMANDS", "serve", "token"]

DEV_CLIENT = "dev"
# Seconds a worker may take to answer the supervisor's health check before it is replaced.
WORKER_HEALTHCHECK_TIMEOUT = 30.0
DEV_TOKEN_TTL = 24 * 3600


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _configure_logging(level: str) -> None:
    # Delivery lines on "ledger.http" and operator lines on "ledger.operator" are already JSON
    # (with their own "ts"): print them bare, one per line, so that a log shipper can parse them;
    # everything else gets an ISO-8601 UTC timestamp and a level.
    root = logging.getLogger()
    root.handlers[:] = [plain_handler()]
    root.setLevel(level)
    bare = JsonLinesHandler()
    for name in JSON_LOGGERS:
        json_log = logging.getLogger(name)
        json_log.handlers[:] = [bare]
        json_log.propagate = False
    # Alembic narrates every start-up migration check at INFO; only its warnings matter here.
    logging.getLogger("alembic").setLevel(logging.WARNING)


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
    _configure_logging(settings.log_level)
    return _served_app(settings)


def _served_app(settings: Settings) -> Litestar:
    """The app as ``ledger serve`` runs it: it owns its process, so once started (its ledger
    open) it freezes the heap it built (:func:`ledger._process.freeze_heap`)."""
    app = create_app(settings)
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


@click.command()
@click.option(
    "--db",
    envvar="LEDGER_DATABASE_URL",
    default=None,
    help="Database URL (sqlite:///ledger.db or postgresql+psycopg://...). "
    "Env: LEDGER_DATABASE_URL; default sqlite:///ledger.db.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--ssl-certfile",
    envvar="LEDGER_SSL_CERTFILE",
    type=click.Path(exists=True, dir_okay=False),
    help="PEM certificate (chain): serve HTTPS. Env: LEDGER_SSL_CERTFILE.",
)
@click.option(
    "--ssl-keyfile",
    envvar="LEDGER_SSL_KEYFILE",
    type=click.Path(exists=True, dir_okay=False),
    help="PEM private key of the certificate. Env: LEDGER_SSL_KEYFILE.",
)
@click.option(
    "--workers",
    envvar="LEDGER_WORKERS",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes sharing the port, each with its own writer; the database keeps "
    "them correct. Env: LEDGER_WORKERS.",
)
def serve(
    db: str | None,
    host: str,
    port: int,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    workers: int,
) -> None:
    """Run the callback server (/bets, /bets/cancel, /winners, /admin, /health, /metrics).

    Configuration comes from LEDGER_* environment variables (the README's table); with
    LEDGER_OPERATOR_LISTEN the console, /admin and /metrics are served on that address only.
    Without
    LEDGER_JWT_SECRET the server runs in development mode on a loopback address only.
    """
    environ = dict(os.environ)
    if db:
        environ["LEDGER_DATABASE_URL"] = db
    try:
        settings = Settings.from_env(environ)
    except SettingsError as exc:
        raise LedgerError(str(exc), key="config.invalid") from None
    if bool(ssl_certfile) != bool(ssl_keyfile):
        raise LedgerError("HTTPS needs both --ssl-certfile and --ssl-keyfile", key="config.invalid")
    scheme = "https" if ssl_certfile else "http"
    banner = None
    if not settings.jwt_secrets:
        if not _is_loopback(host):
            raise LedgerError(
                f"refusing to listen on {host} without LEDGER_JWT_SECRET: set the secret shared "
                "with the platform, or use --host 127.0.0.1 for development mode",
                key="config.missing_secret",
            )
        settings, banner = _development(settings, f"{scheme}://{_url_host(host)}:{port}")

    _configure_logging(settings.log_level)
    if workers > 1:
        _prepare_database(settings)
    config = _uvicorn_config(
        # Several workers: each process builds its own app (and opens its own ledger) from a
        # picklable factory; uvicorn's supervisor binds the socket once and hands it to all.
        partial(_worker_app, settings) if workers > 1 else _served_app(settings),
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
    if banner:
        click.echo(banner)
    if settings.operator_listen is None:
        sockets = None
    else:
        # The operator's side on an address of its own (ledger.http.surfaces): the same app
        # serves both sockets and tells them apart by the address a request arrived on.
        operator_host, operator_port = settings.operator_listen
        operator = _uvicorn_config(None, settings, host=operator_host, port=operator_port)
        sockets = [config.bind_socket(), operator.bind_socket()]
    if workers > 1:
        # SIGTERM or SIGINT to the supervisor reaches every worker, and each shuts down
        # gracefully as a single server does; a worker that dies is replaced.
        Multiprocess(config, sockets=sockets or [config.bind_socket()]).run()
    elif sockets is None:
        uvicorn.Server(config).run()
    else:
        uvicorn.Server(config).run(sockets=sockets)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _development(settings: Settings, base_url: str) -> tuple[Settings, str]:
    """Settings with a generated secret (and operator token), and the banner explaining them."""
    secret = secrets.token_urlsafe(32)
    client = settings.client_name or DEV_CLIENT
    operator_token = settings.operator_token or secrets.token_urlsafe(24)
    settings = replace(
        settings,
        jwt_secrets=(secret,),
        client_name=client,
        operator_token=operator_token,
        dev_mode=True,
    )
    algorithm = settings.jwt_algorithms[0]
    authorization = f"Bearer {client} " + mint_token(
        secret, role="admin", subject="dev", ttl=DEV_TOKEN_TTL, algorithm=algorithm
    )
    # A fresh bet uid per run, so that the printed example is a new entry, not a re-send.
    uid = int(time.time())

    def entry(bet_uid: int, amount: str, rake: str) -> dict[str, Any]:
        return {
            "user": {"uid": "demo-user", "name": "Demo"},
            "pool": {"uid": 1, "game": "fantasy", "currency": "EUR"},
            "bet": {"uid": bet_uid, "amount": amount, "rake": rake, "currency": "EUR"},
        }

    def curl(path: str, header: str, body: dict[str, Any], event: str | None = None) -> str:
        parts = ["curl", "-sS", "-X", "POST", f"{base_url}{path}"]
        if base_url.startswith("https"):
            parts.insert(2, "-k")
        parts += ["-H", "Content-Type: application/json", "-H", f"Authorization: {header}"]
        if event:
            parts += ["-H", f"X-Callback-Event: {event}"]
        parts += ["-d", json.dumps(body, separators=(",", ":"))]
        return " ".join(shlex.quote(part) for part in parts)

    free_bet = {"bets": [entry(uid, "0.00", "0.00")]}
    deposit = {"user": "demo-user", "currency": "EUR", "amount": "100.00", "reference": f"{uid}"}
    paid_bet = {"bets": [entry(uid + 1, "10.00", "1.00")]}
    banner = "\n".join(
        [
            "Development mode: LEDGER_JWT_SECRET is not set, so this run uses generated",
            "credentials (listening on loopback only). To keep them, export:",
            "",
            f"  export LEDGER_JWT_SECRET={secret}",
            f"  export LEDGER_CLIENT_NAME={client}",
            f"  export LEDGER_OPERATOR_TOKEN={operator_token}",
            "",
            f"Authorization header for callbacks (role admin, valid {DEV_TOKEN_TTL // 3600} h):",
            "",
            f"  Authorization: {authorization}",
            "",
            "Place a free-to-play bet (answers 200 with secrets):",
            "",
            "  " + curl("/bets", authorization, free_bet, "create:fantasy_team"),
            "",
            "Deposit 100.00 EUR for demo-user through the operator API:",
            "",
            "  " + curl("/admin/deposits", f"Bearer {operator_token}", deposit),
            "",
            "Then place a paid bet of 10.00 + 1.00 rake (402 user.insufficient_funds without it):",
            "",
            "  " + curl("/bets", authorization, paid_bet, "create:fantasy_team"),
            "",
        ]
    )
    return settings, banner


@click.command()
@click.option("--role", type=click.Choice(["admin", "user"]), default="admin", show_default=True)
@click.option(
    "--sub", default="ledger", show_default=True, help="The token's subject (an admin needs one)."
)
@click.option("--ttl", type=click.IntRange(min=1), default=3600, show_default=True, help="Seconds.")
@click.option("--jwt-only", is_flag=True, help="Print only the JWT, not the header value.")
@click.option(
    "--secret",
    envvar="LEDGER_JWT_SECRET",
    help="Signing secret. Env: LEDGER_JWT_SECRET (the first one of a comma-separated list).",
)
@click.option(
    "--client",
    envvar="LEDGER_CLIENT_NAME",
    default=DEV_CLIENT,
    show_default=True,
    help="Client name in the header. Env: LEDGER_CLIENT_NAME.",
)
@click.option(
    "--algorithm",
    type=click.Choice(["HS256", "HS384", "HS512"]),
    default=None,
    help="Default: the first of LEDGER_JWT_ALGORITHMS, else HS256.",
)
def token(
    role: str,
    sub: str,
    ttl: int,
    jwt_only: bool,
    secret: str | None,
    client: str,
    algorithm: str | None,
) -> None:
    """Print a platform-style token: `Bearer <client> <JWT>` (or only the JWT).

    Use it as the Authorization header when calling the callbacks by hand, or paste the JWT into
    the hosted validator's token check.
    """
    signing = (secret or "").split(",")[0].strip()
    if not signing:
        raise LedgerError(
            "no secret to sign with: set LEDGER_JWT_SECRET or pass --secret",
            key="config.missing_secret",
        )
    if algorithm is None:
        configured = os.environ.get("LEDGER_JWT_ALGORITHMS", "").split(",")[0].strip().upper()
        algorithm = configured or "HS256"
    jwt = mint_token(signing, role=role, subject=sub or None, ttl=ttl, algorithm=algorithm)
    click.echo(jwt if jwt_only else f"Bearer {client} {jwt}")


COMMANDS: list[click.Command] = [serve, token]
