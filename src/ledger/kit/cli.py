"""The conformance kit's commands: ``validate``, ``validate-token``, ``simulate``, and
``tickets`` (:mod:`.ticket_commands`), with the options they share in :mod:`.options`.

``ledger.cli`` adds every command in :data:`COMMANDS` to the ``ledger`` group.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import click

from ..contract import EVENTS
from ..errors import LedgerError
from ..testdata import KIT_PREFIX
from .admin_client import Operator
from .cleanup import Cleaner, ProductionRefused, refuse_production
from .options import first_secret, platform_options, test_data_options
from .platform import Paths, Platform
from .scenarios import CheckResult, Validator
from .simulator import SimulationConfig, Simulator, write_platform_record
from .ticket_api import ServerThread, TicketStore, create_ticket_app
from .ticket_commands import tickets
from .tickets import TicketClient
from .token import DEFAULT_ALGORITHMS, check_token

__all__ = ["COMMANDS", "simulate", "tickets", "validate", "validate_token"]


def _refuse_production(url: str, allow: bool, *, verify: bool = True) -> None:
    # Exit 2, like a usage error: nothing was written, the command was not allowed to start.
    try:
        refuse_production(url, allow=allow, verify=verify)
    except ProductionRefused as error:
        click.echo(f"error: {error.key}: {error.message}", err=True)
        sys.exit(2)


def _paths(refund_tournament_path: str | None) -> Paths:
    return Paths(refund_tournament=refund_tournament_path or "/bets/cancel")


@click.command()
@click.argument("url")
@platform_options
@click.option(
    "--user",
    default=None,
    help="The user to run the scenario with (default: a fresh kit-validate-... user per run). "
    "A user whose uid does not start with kit- is restored to its balance before the run, "
    "never emptied.",
)
@click.option(
    "--unfunded-user",
    default=None,
    help="A user without funds for the 402 check (default: a fresh user id per run).",
)
@click.option("--currency", default="EUR", show_default=True, help="The user's currency.")
@click.option(
    "--operator-token",
    default=None,
    help="Our server's operator token: fund the user and verify balances after each step.",
)
@click.option("--refund-tournament-path", default=None, help="A separate Refund Tournament path.")
@click.option("--timeout", type=float, default=None, help="Seconds per delivery (contract limits).")
@click.option("--insecure", is_flag=True, help="Do not verify the wallet's TLS certificate.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report instead of text.")
@test_data_options
@click.option(
    "--clean-up",
    "clean_up",
    is_flag=True,
    help="Only remove what earlier kit runs left (needs --operator-token), then exit.",
)
def validate(
    url: str,
    client_name: str,
    secret: str,
    user: str | None,
    unfunded_user: str | None,
    currency: str,
    operator_token: str | None,
    refund_tournament_path: str | None,
    timeout: float | None,
    insecure: bool,
    as_json: bool,
    keep: bool,
    allow_production: bool,
    clean_up: bool,
) -> None:
    """Run the platform's verification scenario and the client-side checks against URL.

    Each check prints PASS or FAIL with the endpoint's actual status and body. Exit status 0 only
    when every check passes. With --operator-token it takes out what it wrote (see --keep).
    """
    _refuse_production(url, allow_production, verify=not insecure)
    if clean_up and not operator_token:
        raise click.UsageError("--clean-up needs --operator-token")
    timeouts = dict.fromkeys(EVENTS, timeout) if timeout is not None else None
    platform = Platform(
        url,
        client_name=client_name,
        secret=first_secret(secret),
        paths=_paths(refund_tournament_path),
        timeouts=timeouts,
        verify=not insecure,
    )
    operator = Operator(url, operator_token) if operator_token else None
    if clean_up and operator is not None:
        with platform, operator:
            try:
                summary = Cleaner(platform, operator).sweep()
            except LedgerError as error:
                click.echo(f"error: {error.key}: {error.message}", err=True)
                sys.exit(1)
        click.echo(summary.render())
        sys.exit(0)

    def show(result: CheckResult) -> None:
        if not as_json:
            click.echo(result.render())

    try:
        validator = Validator(
            platform,
            user=user or f"{KIT_PREFIX}validate-{uuid.uuid4().hex[:8]}",
            currency=currency,
            unfunded_user=unfunded_user,
            operator=operator,
            on_result=show,
            keep=keep,
        )
        if not as_json:
            click.echo(
                f"validating {url} as client {client_name!r}, "
                f"user {validator.player.uid!r}, {currency}"
            )
        report = validator.run()
    finally:
        platform.close()
        if operator is not None:
            operator.close()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for note in report.notes:
            click.echo(f"note: {note}")
        click.echo(report.summary())
    sys.exit(0 if report.passed else 1)


@click.command("validate-token")
@click.argument("token")
@click.option(
    "--secret",
    envvar="LEDGER_JWT_SECRET",
    required=True,
    help="The shared secret; a comma-separated list tries each. Env: LEDGER_JWT_SECRET.",
)
@click.option(
    "--algorithm",
    "algorithms",
    multiple=True,
    default=DEFAULT_ALGORITHMS,
    show_default=True,
    help="An accepted algorithm (repeat for several); 'none' is always refused.",
)
@click.option("--client", "client_name", default=None, help="Expected client name, if given.")
def validate_token(
    token: str, secret: str, algorithms: tuple[str, ...], client_name: str | None
) -> None:
    """Check TOKEN like the hosted validator: signature, algorithm, expiry, required claims.

    TOKEN is a bare JWT or a whole 'Bearer <client> <JWT>' header value.
    """
    secrets = [part.strip() for part in secret.split(",") if part.strip()]
    checks = check_token(token, secrets, algorithms=algorithms, client_name=client_name)
    for check in checks:
        click.echo(check.render())
    valid = all(check.passed for check in checks)
    click.echo("token is valid" if valid else "token is NOT valid")
    sys.exit(0 if valid else 1)


@click.command()
@click.argument("url")
@platform_options
@click.option(
    "--operator-token",
    envvar="LEDGER_OPERATOR_TOKEN",
    required=True,
    help="The wallet's operator token (funding and reconciliation). Env: LEDGER_OPERATOR_TOKEN.",
)
@click.option("--users", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--tournaments", type=click.IntRange(1, 10_000), default=10, show_default=True)
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same day.")
@click.option("--faults", is_flag=True, help="Re-sends, concurrent duplicates, lost answers.")
@click.option("--concurrency", type=click.IntRange(2, 64), default=4, show_default=True)
@click.option("--tickets-port", type=int, default=0, help="Port of the ticket API (0: any free).")
@click.option("--refund-tournament-path", default=None, help="A separate Refund Tournament path.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--platform-record",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the platform's record of its bets here for `ledger reconcile` "
    "(.csv, .tsv, .json or .jsonl).",
)
@test_data_options
def simulate(
    url: str,
    client_name: str,
    secret: str,
    operator_token: str,
    users: int,
    tournaments: int,
    seed: int,
    faults: bool,
    concurrency: int,
    tickets_port: int,
    refund_tournament_path: str | None,
    no_progress: bool,
    as_json: bool,
    platform_record: Path | None,
    keep: bool,
    allow_production: bool,
) -> None:
    """Play a seeded platform day against the wallet at URL and reconcile its books.

    Exit status 1 on any mismatch between the platform's books and the wallet's. Its users'
    balances are withdrawn at the end (see --keep).
    """
    _refuse_production(url, allow_production)
    config = SimulationConfig(
        users=users,
        tournaments=tournaments,
        seed=seed,
        faults=faults,
        concurrency=concurrency,
        progress=not no_progress and not as_json,
        keep=keep,
    )
    signing = first_secret(secret)
    store = TicketStore(secret=signing)
    with (
        ServerThread(
            create_ticket_app(store, client_name=client_name), port=tickets_port
        ) as server,
        Platform(
            url, client_name=client_name, secret=signing, paths=_paths(refund_tournament_path)
        ) as platform,
        Operator(url, operator_token) as operator,
        TicketClient(server.url, client_name=client_name, secret=signing) as ticket_client,
    ):
        if not as_json:
            click.echo(f"ticket API of the simulated platform at {server.url}/tournament_tickets")
        simulator = Simulator(platform, operator, config, tickets=ticket_client, ticket_store=store)
        report = simulator.run()
    if platform_record is not None:
        write_platform_record(simulator.platform_record(), platform_record)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.render())
    sys.exit(0 if report.ok else 1)


COMMANDS: list[click.Command] = [validate, validate_token, simulate, tickets]
