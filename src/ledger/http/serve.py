"""The ``ledger serve`` and ``ledger token`` commands (registered by :mod:`ledger.cli`).

``serve`` first checks what it can check at once (the settings, the secrets, the TLS files, the
database URL, that its ports are free: :mod:`ledger.http.preflight`), and only then imports and
starts the app (:mod:`ledger.http.launch`), the part that takes seconds. Without
``LEDGER_JWT_SECRET`` it runs in development mode, and only on a loopback address: it generates a
secret and an operator token for this run and prints ready-to-paste ``curl`` commands. Anywhere
else it refuses to start, because a wallet that accepts any caller pays anyone.

Refusals raise :class:`~ledger.errors.LedgerError`, which the ``ledger`` group prints as
``error: <key>: <message>`` (exit 1), like every other command's.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import secrets
import shlex
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from ..errors import LedgerError
from ..settings import Settings, SettingsError
from ..variables import RecordingEnviron, unknown_variable_warnings
from . import preflight
from .logs import configure_logging

if TYPE_CHECKING:
    from ..service import Ledger

__all__ = ["COMMANDS", "serve", "token"]

# The [server] extra's packages, imported only once the checks have passed; looked up here (not
# imported) so that without the extra `ledger serve` and `ledger token` say which to install
# (ledger.cli turns a ModuleNotFoundError of this module into `error: missing.extra`).
SERVER_PACKAGES = ("litestar", "uvicorn", "prometheus_client", "jwt", "jinja2", "httpx", "limits")


def _require(names: tuple[str, ...]) -> None:
    for name in names:
        try:
            found = importlib.util.find_spec(name)
        except ValueError:  # in sys.modules as None: made impossible to import
            found = None
        if found is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


_require(SERVER_PACKAGES)

DEV_CLIENT = "dev"
DEV_TOKEN_TTL = 24 * 3600


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    Without LEDGER_JWT_SECRET the server runs in development mode on a loopback address only.
    Ctrl-C or SIGTERM: it finishes what is in flight and exits.
    """
    environ = RecordingEnviron(
        {**os.environ, "LEDGER_DATABASE_URL": db} if db else dict(os.environ)
    )
    try:
        settings = Settings.from_env(environ)
    except SettingsError as exc:
        _warn_unknown(environ)  # a misspelt name may be why a setting is missing
        raise LedgerError(str(exc), key="config.invalid") from None
    _warn_unknown(environ)
    preflight.check_database_url(settings.database_url)
    preflight.check_tls(ssl_certfile, ssl_keyfile)
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
    preflight.check_listen(host, port)
    if settings.operator_listen is not None:
        preflight.check_listen(*settings.operator_listen)

    configure_logging(settings.log_level)
    # One server process: its ledger (and the writer process, a new interpreter that imports
    # and opens the store) is opened on a thread while this one imports and builds the app,
    # on another core where there is one. Several: each worker opens its own.
    opening = _open_ahead(settings) if workers == 1 else None

    from .launch import run  # the slow part: the app, its ledger and writer, uvicorn

    if banner:
        click.echo(banner)
    run(
        settings,
        host=host,
        port=port,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        workers=workers,
        opening=opening,
    )


def _open_ahead(settings: Settings) -> Future[Ledger]:
    """The ledger of ``settings``, opening on a thread of its own; the app takes it at start-up
    and closes it at shutdown. Its failure (a database down) is the app's to report and retry,
    as if the app had opened it itself."""
    from ..service import open_ledger

    opening: Future[Ledger] = Future()

    def work() -> None:
        try:
            opening.set_result(
                open_ledger(
                    settings.database_url,
                    currencies=settings.currencies,
                    **settings.ledger_options(),
                )
            )
        except BaseException as exc:  # noqa: BLE001 - the app's, raised where it waits
            opening.set_exception(exc)

    # A daemon: a start-up stopped before the app took the ledger does not wait for it.
    threading.Thread(target=work, name="ledger-open", daemon=True).start()
    return opening


def _warn_unknown(environ: RecordingEnviron) -> None:
    for warning in unknown_variable_warnings(environ, also_read=environ.read):
        click.echo(warning, err=True)


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
    from .auth import mint_token  # PyJWT: only now that a token is needed

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
            f"The operators' console is at {base_url}/console. Add its first operator (the",
            "command asks for a password) from another shell in this directory:",
            "",
            "  ledger operators add admin --role admin",
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
    from .auth import mint_token

    jwt = mint_token(signing, role=role, subject=sub or None, ttl=ttl, algorithm=algorithm)
    click.echo(jwt if jwt_only else f"Bearer {client} {jwt}")


COMMANDS: list[click.Command] = [serve, token]
