"""``ledger tickets``: the platform's ticket administration API (contract section 4.2) from the
command line, and ``tickets serve``, the simulated one.

Invariant: a call's answer is printed as JSON and exits 0; the API's refusal prints
``error: <status> <message>: <error>`` and exits 1. Proved by ``tests/e2e/test_cli.py``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import click

from ..http.preflight import check_listen
from .options import F, first_secret
from .ticket_api import ServerThread, TicketStore, create_ticket_app
from .tickets import TICKET_TYPES, TicketClient, TicketError

__all__ = ["tickets"]


def ticket_options(function: F) -> F:
    function = click.option(
        "--token", default=None, help="A ready admin JWT instead of signing one with --secret."
    )(function)
    function = click.option(
        "--secret",
        envvar="LEDGER_JWT_SECRET",
        default=None,
        help="Shared secret to sign a short-lived admin JWT. Env: LEDGER_JWT_SECRET.",
    )(function)
    function = click.option(
        "--client",
        "client_name",
        envvar="LEDGER_CLIENT_NAME",
        required=True,
        help="Client name for 'Bearer <client> <admin JWT>'. Env: LEDGER_CLIENT_NAME.",
    )(function)
    return click.option(
        "--url",
        envvar="LEDGER_TICKETS_URL",
        required=True,
        help="The ticket API's base URL. Env: LEDGER_TICKETS_URL.",
    )(function)


def _client(url: str, client_name: str, secret: str | None, token: str | None) -> TicketClient:
    if (secret is None) == (token is None):
        raise click.UsageError("give --secret or --token (one of them)")
    return TicketClient(
        url,
        client_name=client_name,
        secret=first_secret(secret) if secret is not None else None,
        token=token,
    )


def _run_ticket_call(call: Callable[[], Any]) -> None:
    try:
        result = call()
    except TicketError as error:
        click.echo(f"error: {error.status} {error.message}: {error.error}", err=True)
        sys.exit(1)
    click.echo(json.dumps(result, indent=2))


@click.group()
def tickets() -> None:
    """Tournament ticket administration on the platform (contract section 4.2)."""


@tickets.command("create")
@ticket_options
@click.option("--uid", "uids", multiple=True, required=True, help="A user id (repeat for more).")
@click.option("--due-at", required=True, help="Valid until, ISO 8601 (2030-01-31T23:59:00Z).")
@click.option("--currency", required=True)
@click.option("--buy-in", required=True, help="Stack, or cost of the ticket (decimal).")
@click.option("--type", "kind", type=click.Choice(TICKET_TYPES), default=None)
@click.option("--tournament-id", type=int, default=None)
@click.option("--season-id", type=int, default=None)
@click.option("--comment", default=None)
@click.option("--ref", default=None, help="A UUID grouping the tickets (generated if omitted).")
def tickets_create(
    url: str,
    client_name: str,
    secret: str | None,
    token: str | None,
    uids: tuple[str, ...],
    due_at: str,
    currency: str,
    buy_in: str,
    kind: Any,
    tournament_id: int | None,
    season_id: int | None,
    comment: str | None,
    ref: str | None,
) -> None:
    """Create one ticket per --uid."""
    try:
        amount = Decimal(buy_in)
    except InvalidOperation:
        raise click.BadParameter(f"{buy_in!r} is not a decimal", param_hint="--buy-in") from None
    with _client(url, client_name, secret, token) as client:
        _run_ticket_call(
            lambda: client.create(
                uids=uids,
                due_at=due_at,
                currency=currency,
                buy_in=amount,
                type=kind,
                tournament_id=tournament_id,
                season_id=season_id,
                comment=comment,
                ref=ref,
            ).to_dict()
        )


@tickets.command("list")
@ticket_options
@click.option("--user-id", default=None)
@click.option("--id", "ids", type=int, multiple=True, help="A ticket id (repeat for more).")
@click.option("--ref", default=None)
@click.option("--limit", type=click.IntRange(1), default=None, help="Page size (API default 50).")
@click.option("--page", type=click.IntRange(0), default=None, help="0-based page number.")
def tickets_list(
    url: str,
    client_name: str,
    secret: str | None,
    token: str | None,
    user_id: str | None,
    ids: tuple[int, ...],
    ref: str | None,
    limit: int | None,
    page: int | None,
) -> None:
    """List tickets, newest id first."""
    with _client(url, client_name, secret, token) as client:
        _run_ticket_call(
            lambda: client.list(
                user_id=user_id, ids=ids or None, ref=ref, limit=limit, page=page
            ).to_dict()
        )


@tickets.command("delete")
@ticket_options
@click.argument("ticket_id", type=int)
def tickets_delete(
    url: str, client_name: str, secret: str | None, token: str | None, ticket_id: int
) -> None:
    """Delete an unused ticket (a used one is refused with 403)."""
    with _client(url, client_name, secret, token) as client:
        _run_ticket_call(lambda: {"ticket": client.delete(ticket_id).to_dict()})


@tickets.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8100, show_default=True)
@click.option(
    "--client",
    "client_name",
    envvar="LEDGER_CLIENT_NAME",
    required=True,
    help="The client name callers must send in 'Bearer <client> <admin JWT>'. "
    "Env: LEDGER_CLIENT_NAME.",
)
@click.option(
    "--secret",
    envvar="LEDGER_JWT_SECRET",
    required=True,
    help="The shared secret admin JWTs must be signed with (the first of a comma-separated "
    "list). Env: LEDGER_JWT_SECRET.",
)
def tickets_serve(host: str, port: int, client_name: str, secret: str) -> None:
    """Serve the simulated platform's ticket API (in memory) until interrupted.

    --client and --secret default to LEDGER_CLIENT_NAME and LEDGER_JWT_SECRET.
    """
    # A busy port is said at once, as `ledger serve` says it, not as a bind's traceback.
    check_listen(host, port, server="ledger tickets serve")
    store = TicketStore(secret=first_secret(secret))
    server = ServerThread(create_ticket_app(store, client_name=client_name), host=host, port=port)
    with server:
        click.echo(f"ticket API at {server.url}/tournament_tickets (Ctrl-C to stop)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
