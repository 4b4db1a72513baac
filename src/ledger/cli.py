"""The ``ledger`` command (click).

Every command that touches the database takes ``--db URL`` (default ``$LEDGER_DATABASE_URL``,
else ``sqlite:///ledger.db``). The read commands (``balance``, ``statement``, ``bet``,
``check``) never create a database; ``db upgrade``, ``deposit``, ``withdraw`` and ``serve`` do.
Errors print ``error: <key>: <message>`` on stderr and exit 1; ``ledger check`` exits 1 when an
invariant fails. ``--json`` prints one line of JSON, in the shapes of :mod:`ledger.views`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import click

from . import views
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
def opened(db: str, *, migrate: bool | None = None, create: bool = True) -> Iterator[Ledger]:
    """Open the ledger, turning any ledger error into a clean exit.

    ``create=False`` is for the read commands: a SQLite file that does not exist is refused
    (``store.not_found``) rather than created empty, so that a typo in ``--db`` cannot report
    an empty, clean ledger.
    """
    try:
        book = open_ledger(
            db, currencies=CurrencyTable.from_env(os.environ), migrate=migrate, create=create
        )
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
    # One line: what the README shows, and what `jq` and log shippers read best.
    click.echo(json.dumps(data))


SHORT_KEY_WARNING = (
    "warning: jwt.short_secret: the JWT secret is shorter than RFC 7518 section 3.2 asks for "
    "its algorithm (32 bytes for HS256, 48 for HS384, 64 for HS512): anyone holding one token "
    "can guess a short secret offline; agree a longer one with the platform"
)


@contextmanager
def _short_secret_warning() -> Iterator[None]:
    """Say PyJWT's ``InsecureKeyLengthWarning`` once, in the project's words.

    Warned, not refused: the secret is the one the platform shares, not ours to choose. Matched
    by name, so that the CLI does not import PyJWT (the library alone does not need it).
    """
    said = False
    original = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        nonlocal said
        if category.__name__ != "InsecureKeyLengthWarning":
            original(message, category, filename, lineno, file, line)
        elif not said:
            said = True
            click.echo(SHORT_KEY_WARNING, err=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


class _Main(click.Group):
    """The ``ledger`` group: every command's ledger errors print ``error: <key>: <message>``."""

    def invoke(self, ctx: click.Context) -> Any:
        with _short_secret_warning():
            try:
                return super().invoke(ctx)
            except LedgerError as error:
                fail(error)


@click.group(cls=_Main)
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
            emit(result.to_dict())
        else:
            click.echo(views.movement_text(kind, result))

    return command


main.command("deposit", help="Credit USER with AMOUNT of CURRENCY from outside.")(
    _movement("deposit")
)
main.command("withdraw", help="Pay AMOUNT of CURRENCY out of USER's available balance.")(
    _movement("withdrawal")
)


# --- reads: they never create a database ---------------------------------------------------------


@main.command()
@db_option
@click.argument("user")
@click.option("--currency", help="Only this currency.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def balance(db: str, user: str, currency: str | None, as_json: bool) -> None:
    """Show USER's available and held balances."""
    with opened(db, create=False) as book:
        balances = book.balance(user, currency)
    if as_json:
        emit(views.balances_dict(user, balances))
        return
    for line in views.balance_lines(user, balances):
        click.echo(line)


@main.command()
@db_option
@click.argument("user")
@click.option("--currency", help="Only this currency.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--before",
    type=int,
    default=None,
    help="Only lines older than this line id: the cursor the previous page printed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def statement(
    db: str, user: str, currency: str | None, limit: int, before: int | None, as_json: bool
) -> None:
    """Show USER's movements, newest first, a page at a time."""
    with opened(db, create=False) as book:
        lines = book.statement(user, currency, limit=limit, before=before)
    next_page = views.next_before(lines, limit)
    if as_json:
        emit(views.statement_dict(user, lines, next_page))
        return
    for line in lines:
        click.echo(views.statement_line_text(line))
    if next_page is not None:
        click.echo(f"next page: --before {next_page}")


@main.command()
@db_option
@click.argument("bet_uid", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bet(db: str, bet_uid: int, as_json: bool) -> None:
    """Show the recorded state of bet BET_UID."""
    with opened(db, create=False) as book:
        found = book.bet(bet_uid)
    if found is None:
        click.echo(f"error: bet.not_found: bet {bet_uid} is unknown", err=True)
        sys.exit(1)
    if as_json:
        emit(found.to_dict())
    else:
        click.echo(views.bet_text(found))


@main.command()
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def check(db: str, as_json: bool) -> None:
    """Verify the journal's invariants; exit 1 with a report when one fails."""
    with opened(db, create=False) as book:
        report = book.check()
    if as_json:
        emit(views.check_dict(report))
    else:
        for line in views.check_lines(report):
            click.echo(line)
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

# The console's operators and audit log (ledger.operator_commands), imported last: that module
# builds on this one's helpers.
from .operator_commands import COMMANDS as _OPERATOR_COMMANDS  # noqa: E402

for _command in _OPERATOR_COMMANDS:
    main.add_command(_command)
