"""The ``ledger`` command (click).

Every command that touches the database takes ``--db URL`` (default ``$LEDGER_DATABASE_URL``,
else ``sqlite:///ledger.db``). The read commands (``balance``, ``statement``, ``holds``,
``house``, ``bet``, ``check``) never create a database; ``db upgrade``, ``deposit``,
``withdraw`` and ``serve`` do.
Errors print ``error: <key>: <message>`` on stderr and exit 1; ``ledger check`` exits 1 when an
invariant fails. ``--json`` prints one line of JSON, in the shapes of :mod:`ledger.views`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import click

from . import views
from .currencies import CurrencyTable
from .errors import LedgerError
from .paging import EXPORT_PAGE, Page, csv_lines
from .service import Ledger, open_ledger, parse_instant
from .settings import SettingsError, stale_hold_options
from .views import HoldView

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
def opened(
    db: str, *, migrate: bool | None = None, create: bool = True, **options: Any
) -> Iterator[Ledger]:
    """Open the ledger, turning any ledger error into a clean exit.

    ``create=False`` is for the read commands: a SQLite file that does not exist is refused
    (``store.not_found``) rather than created empty, so that a typo in ``--db`` cannot report
    an empty, clean ledger.
    """
    try:
        book = open_ledger(
            db,
            currencies=CurrencyTable.from_env(os.environ),
            migrate=migrate,
            create=create,
            **options,
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
@click.option(
    "--at",
    "at",
    default=None,
    help="The balances at this moment instead: ISO 8601 with a zone, e.g. 2026-11-20T00:00:00Z.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def balance(db: str, user: str, currency: str | None, at: str | None, as_json: bool) -> None:
    """Show USER's available and held balances (now, or --at a past moment)."""
    with opened(db, create=False) as book:
        if at is None:
            balances = book.balance(user, currency)
        else:
            moment = parse_instant(at, "--at")
            balances = book.balance_at(user, moment, currency)
    if as_json:
        if at is None:
            emit(views.balances_dict(user, balances))
        else:
            emit(views.balances_at_dict(user, moment, balances))
        return
    if at is not None:
        click.echo(f"{user} at {views.timestamp_text(moment)}")
    for line in views.balance_lines(user, balances):
        click.echo(line)


@main.command()
@db_option
@click.argument("user")
@click.option("--currency", help="Only this currency.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--before",
    default=None,
    help="Only lines older than this: the cursor (or line id) the previous page printed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every line as CSV (streamed).")
def statement(
    db: str,
    user: str,
    currency: str | None,
    limit: int,
    before: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """Show USER's movements, newest first, with the balance after each, a page at a time."""
    with opened(db, create=False) as book:
        if as_csv:
            # Read a page at a time while writing: the whole statement is never in memory.
            first = book.statement_page(user, currency, limit=EXPORT_PAGE, before=before)
            lines = _pages(
                first,
                lambda after: book.statement_page(user, currency, limit=EXPORT_PAGE, before=after),
            )
            _write_csv(lines, views.STATEMENT_COLUMNS)
            return
        page = book.statement_page(user, currency, limit=limit, before=before)
    answer = views.statement_dict(user, page.items, page.next)
    if as_json:
        emit(answer)
        return
    for line in page.items:
        click.echo(views.statement_line_text(line))
    if answer["next_before"] is not None:
        # The line id: the same position as the cursor, and what this command always printed.
        click.echo(f"next page: --before {answer['next_before']}")


@main.command()
@db_option
@click.option("--stale", is_flag=True, help="Only the stale ones: the bets to chase.")
@click.option("--user", default=None, help="Only this user's.")
@click.option("--pool", "pool_uid", type=int, default=None, help="Only this tournament's.")
@click.option("--older-than", default=None, help="Placed longer ago than this: 2d, 12h, 90m.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--before", default=None, help="The cursor the previous page printed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every hold as CSV (streamed).")
def holds(
    db: str,
    stale: bool,
    user: str | None,
    pool_uid: int | None,
    older_than: str | None,
    limit: int,
    before: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """Show open holds (placed bets not settled or refunded), oldest first.

    Stale: the tournament's estimated end plus LEDGER_STALE_HOLD_GRACE (default 6h) has passed
    or, without an end time, placed more than LEDGER_STALE_HOLD_DAYS (default 7) ago.
    """
    try:
        stale_options = stale_hold_options(os.environ)
    except SettingsError as error:
        fail(error)
    with opened(db, create=False, **stale_options) as book:

        def read(after: str | None, size: int) -> Page[HoldView]:
            return book.holds(
                stale=stale,
                user=user,
                pool_uid=pool_uid,
                older_than=older_than,
                limit=size,
                before=after,
            )

        if as_csv:
            first = read(before, EXPORT_PAGE)
            _write_csv(_pages(first, lambda after: read(after, EXPORT_PAGE)), views.HOLD_COLUMNS)
            return
        page = read(before, limit)
    if as_json:
        emit(views.holds_dict(page.items, page.next))
        return
    if not page.items:
        click.echo("no open holds" if not stale else "no stale holds")
    for hold in page.items:
        click.echo(views.hold_text(hold))
    if page.next is not None:
        click.echo(f"next page: --before {page.next}")


@main.command()
@db_option
@click.option("--since", default=None, help="From this moment (inclusive), ISO 8601 with a zone.")
@click.option("--until", default=None, help="Until this moment (exclusive), ISO 8601 with a zone.")
@click.option("--currency", default=None, help="Only this currency.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def house(
    db: str, since: str | None, until: str | None, currency: str | None, as_json: bool
) -> None:
    """Show the house accounts per currency, and the period's deposits, withdrawals, stakes
    captured, rake earned, prizes paid, ticket-funded entries, refunds, entries and players."""
    with opened(db, create=False) as book:
        report = book.house(since, until, currency)
    if as_json:
        emit(report.to_dict())
        return
    for line in views.house_lines(report):
        click.echo(line)


def _pages(first: Page[Any], read: Callable[[str], Page[Any]]) -> Iterator[dict[str, Any]]:
    """The items of ``first`` and of every page after it, as dicts, read as they are needed."""
    page = first
    while True:
        yield from (item.to_dict() for item in page.items)
        if page.next is None:
            return
        page = read(page.next)


def _write_csv(rows: Iterator[dict[str, Any]], columns: Sequence[str]) -> None:
    for text in csv_lines(rows, columns):
        click.echo(text, nl=False)


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
