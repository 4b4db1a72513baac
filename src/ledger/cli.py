"""The ``ledger`` command (click).

Every command that touches the database takes ``--db URL`` (default ``$LEDGER_DATABASE_URL``,
else ``sqlite:///ledger.db``). Errors print ``error: <key>: <message>`` on stderr and exit 1;
``ledger check`` exits 1 when an invariant fails.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from .currencies import CurrencyTable
from .errors import LedgerError
from .service import Ledger, open_ledger

__all__ = ["main"]

DEFAULT_DB = "sqlite:///ledger.db"

F = TypeVar("F", bound=Callable[..., Any])


def db_option(function: F) -> F:
    """The ``--db`` option shared by every database command."""
    return click.option(
        "--db",
        "db",
        envvar="LEDGER_DATABASE_URL",
        default=DEFAULT_DB,
        show_default=True,
        help="Database URL: sqlite:///path.db or postgresql://user@host/db (psycopg 3).",
    )(function)


@contextmanager
def opened(db: str, *, migrate: bool | None = None) -> Iterator[Ledger]:
    """Open the ledger, turning any ledger error into a clean exit."""
    try:
        book = open_ledger(db, currencies=CurrencyTable.from_env(os.environ), migrate=migrate)
    except (LedgerError, ValueError) as error:
        fail(error)
    try:
        yield book
    except LedgerError as error:
        fail(error)
    finally:
        book.close()


def fail(error: Exception) -> Any:
    key = error.key if isinstance(error, LedgerError) else "usage"
    message = error.message if isinstance(error, LedgerError) else str(error)
    click.echo(f"error: {key}: {message}", err=True)
    sys.exit(1)


def emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


@click.group()
@click.version_option(package_name="ledger")
def main() -> None:
    """A double-entry wallet ledger for a fantasy-sports platform's wallet callbacks."""


# --- database ----------------------------------------------------------------------------------


@main.group()
def db() -> None:
    """Schema management."""


@db.command("upgrade")
@db_option
def db_upgrade(db: str) -> None:
    """Create or upgrade the schema to the newest migration (Alembic)."""
    with opened(db, migrate=True):
        pass
    click.echo("schema is up to date")


# --- money in and out --------------------------------------------------------------------------


def _movement(kind: str) -> Callable[..., None]:
    @db_option
    @click.argument("user")
    @click.argument("currency")
    @click.argument("amount")
    @click.option("--reference", help="Idempotency key: the same reference applies once.")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    def command(
        db: str, user: str, currency: str, amount: str, reference: str | None, as_json: bool
    ) -> None:
        with opened(db) as book:
            move = book.deposit if kind == "deposit" else book.withdraw
            result = move(user, currency, amount, reference)
        if as_json:
            emit(
                {
                    "reference": result.reference,
                    "user": result.user,
                    "currency": result.currency,
                    "amount": str(result.amount),
                    "applied": result.applied,
                }
            )
            return
        state = "applied" if result.applied else "already applied (nothing done)"
        click.echo(
            f"{kind} {result.reference}: {result.amount} {result.currency} "
            f"for {result.user} {state}"
        )

    return command


main.command("deposit", help="Credit USER with AMOUNT of CURRENCY from outside.")(
    _movement("deposit")
)
main.command("withdraw", help="Pay AMOUNT of CURRENCY out of USER's available balance.")(
    _movement("withdrawal")
)


# --- reads -------------------------------------------------------------------------------------


@main.command()
@db_option
@click.argument("user")
@click.option("--currency", help="Only this currency.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def balance(db: str, user: str, currency: str | None, as_json: bool) -> None:
    """Show USER's available and held balances."""
    with opened(db) as book:
        balances = book.balance(user, currency)
    if as_json:
        emit({"user": user, "balances": [item.to_dict() for item in balances]})
        return
    if not balances:
        click.echo(f"{user} has no balances")
    for item in balances:
        click.echo(f"{item.currency}  available {item.available}  held {item.held}")


@main.command()
@db_option
@click.argument("user")
@click.option("--currency", help="Only this currency.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def statement(db: str, user: str, currency: str | None, limit: int, as_json: bool) -> None:
    """Show USER's movements, newest first."""
    with opened(db) as book:
        lines = book.statement(user, currency, limit=limit)
    if as_json:
        emit({"user": user, "lines": [line.to_dict() for line in lines]})
        return
    for line in lines:
        subject = f"bet {line.bet_uid}" if line.bet_uid is not None else line.reference or ""
        click.echo(
            f"{line.created_at:%Y-%m-%d %H:%M:%S}  {line.kind:<10} {line.account:<9} "
            f"{line.amount:>14} {line.currency}  {subject}"
        )


@main.command()
@db_option
@click.argument("bet_uid", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bet(db: str, bet_uid: int, as_json: bool) -> None:
    """Show the recorded state of bet BET_UID."""
    with opened(db) as book:
        found = book.bet(bet_uid)
    if found is None:
        click.echo(f"error: bet.not_found: bet {bet_uid} is unknown", err=True)
        sys.exit(1)
    if as_json:
        emit(found.to_dict())
        return
    payout = f", payout {found.payout} {found.payout_currency}" if found.payout is not None else ""
    click.echo(
        f"bet {found.uid}: {found.state}, user {found.user}, pool {found.pool_uid}, "
        f"{found.amount} + rake {found.rake} {found.currency} ({found.funding}){payout}"
    )


@main.command()
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def check(db: str, as_json: bool) -> None:
    """Verify the journal's invariants; exit 1 with a report when one fails."""
    with opened(db) as book:
        report = book.check()
    if as_json:
        emit(
            {
                "ok": report.ok,
                "problems": report.problems,
                "transactions": report.transactions,
                "postings": report.postings,
                "accounts": report.accounts,
                "bets": report.bets,
            }
        )
    else:
        for problem in report.problems:
            click.echo(f"FAIL {problem}")
        verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        click.echo(
            f"{verdict}: {report.transactions} transactions, {report.postings} postings, "
            f"{report.accounts} accounts, {report.bets} bets"
        )
    sys.exit(0 if report.ok else 1)


# Server and conformance-kit commands live with their packages, each behind its extra; each
# module exposes COMMANDS. Without an extra's packages, stand-ins of the same names say which
# extra to install (tests/e2e/test_install_extras.py keeps the names in step).
EXTRA_COMMANDS = {
    "ledger.http.serve": ("server", ("serve", "token")),
    "ledger.kit.commands": ("kit", ("validate", "validate-token", "simulate", "tickets")),
}


def _missing_extra(name: str, extra: str) -> click.Command:
    @click.command(
        name,
        help=f"Needs the [{extra}] extra: pip install 'ledger[{extra}]'.",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    def stand_in() -> None:
        click.echo(f"error: missing.extra: install ledger[{extra}]", err=True)
        sys.exit(1)

    return stand_in


for _module, (_extra, _names) in EXTRA_COMMANDS.items():
    try:
        _commands = importlib.import_module(_module).COMMANDS
    except ModuleNotFoundError as _missing:
        # Only a package of the extra may be missing; a missing module of our own is a bug.
        if (_missing.name or "ledger").split(".")[0] == "ledger":
            raise
        _commands = [_missing_extra(_name, _extra) for _name in _names]
    for _command in _commands:
        main.add_command(_command)
