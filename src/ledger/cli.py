"""The ``ledger`` command (click).

Every command that touches the database takes ``--db URL`` (default ``$LEDGER_DATABASE_URL``,
else ``sqlite:///ledger.db``). The read commands (``balance``, ``statement``, ``holds``,
``house``, ``bet``, ``check``, ``deliveries``, ``events``) never create a database; ``db upgrade``,
``deposit``, ``withdraw`` and ``serve`` do.
Errors print ``error: <key>: <message>`` on stderr and exit 1; ``ledger check`` exits 1 when an
invariant fails. ``--json`` prints one line of JSON, in the shapes of :mod:`ledger.views`.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO, TypeVar

import click

from . import events as feed
from . import views
from .currencies import CurrencyTable
from .deliveries import DEFAULT_RETENTION_DAYS, DeliveryFilter
from .errors import BetNotFound, LedgerError, TournamentNotFound, UserNotFound
from .paging import DEFAULT_LIMIT, EXPORT_PAGE, MAX_LIMIT, Page, csv_lines, every
from .service import Ledger, open_ledger, parse_instant
from .settings import SettingsError, stale_hold_options
from .views import HoldView

# Seconds `ledger events --follow` waits for an event before looking whether it was stopped.
FOLLOW_WAIT = 1.0

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


def fail(error: Exception) -> NoReturn:
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
        book.require_user(user)
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
        book.require_user(user)
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
        fail(BetNotFound(f"bet {bet_uid} is unknown"))
    if as_json:
        emit(found.to_dict())
    else:
        click.echo(views.bet_text(found))


# --- the directory: tournaments, users, bets (ledger.directory) ---------------------------------


def _list_options(function: F) -> F:
    """``--limit``, ``--before`` and ``--json|--csv``, shared by every list command."""
    for option in reversed(
        [
            click.option(
                "--limit",
                default=DEFAULT_LIMIT,
                show_default=True,
                type=click.IntRange(1, MAX_LIMIT),
            ),
            click.option("--before", help="The cursor the previous page printed."),
            click.option("--json", "as_json", is_flag=True, help="Print one page as JSON."),
            click.option(
                "--csv", "as_csv", is_flag=True, help="Print every page (from --before) as CSV."
            ),
        ]
    ):
        function = option(function)
    return function


def _print_list(
    name: str,
    read: Callable[[str | None, int], Page[Any]],
    options: dict[str, Any],
    columns: tuple[str, ...],
    row_text: Callable[[Any], str],
) -> None:
    if options["as_json"] and options["as_csv"]:
        fail(ValueError("--json and --csv exclude each other"))
    if options["as_csv"]:
        # Page by page as it prints: a whole export never sits in memory.
        rows = every(lambda after: read(after or options["before"], EXPORT_PAGE))
        for chunk in csv_lines((item.to_dict() for item in rows), columns):
            click.echo(chunk, nl=False)
        return
    page = read(options["before"], options["limit"])
    if options["as_json"]:
        emit({name: [item.to_dict() for item in page.items], "next": page.next})
        return
    for item in page.items:
        click.echo(row_text(item))
    if page.next is not None:
        click.echo(f"next page: --before {page.next}")


def _show(data: dict[str, Any], lines: list[str], as_json: bool) -> None:
    if as_json:
        emit(data)
        return
    for line in lines:
        click.echo(line)


@main.command()
@db_option
@click.option("--status", help="Only tournaments whose last status seen is this one.")
@click.option("--search", help="Case-insensitive substring of the name or the uid.")
@_list_options
def tournaments(db: str, status: str | None, search: str | None, **options: Any) -> None:
    """List tournaments as the platform described them, newest first."""
    with opened(db, create=False) as book:
        _print_list(
            "tournaments",
            lambda before, limit: book.tournaments(status, search, limit=limit, before=before),
            options,
            views.TOURNAMENT_COLUMNS,
            views.tournament_row_text,
        )


@main.command()
@db_option
@click.argument("uid", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tournament(db: str, uid: int, as_json: bool) -> None:
    """Show tournament UID with its report per currency."""
    with opened(db, create=False) as book:
        found = book.tournament(uid)
    if found is None:
        fail(TournamentNotFound(f"tournament {uid} is unknown"))
    _show(found.to_dict(), views.tournament_lines(found), as_json)


@main.command()
@db_option
@click.option("--search", help="Case-insensitive substring of the uid or the name.")
@_list_options
def users(db: str, search: str | None, **options: Any) -> None:
    """List users as the platform described them, newest first."""
    with opened(db, create=False) as book:
        _print_list(
            "users",
            lambda before, limit: book.users(search, limit=limit, before=before),
            options,
            views.USER_COLUMNS,
            views.user_row_text,
        )


@main.command()
@db_option
@click.argument("uid")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def user(db: str, uid: str, as_json: bool) -> None:
    """Show user UID with their balances."""
    with opened(db, create=False) as book:
        found = book.user(uid)
    if found is None:
        fail(UserNotFound(f"user {uid} is unknown"))
    _show(found.to_dict(), views.user_lines(found), as_json)


@main.command()
@db_option
@click.option("--user", help="Only this user's bets.")
@click.option("--pool", type=int, help="Only this tournament's bets.")
@click.option(
    "--state", type=click.Choice(["placed", "refunded", "settled"]), help="Only this state."
)
@_list_options
def bets(db: str, user: str | None, pool: int | None, state: str | None, **options: Any) -> None:
    """List bets, highest uid first."""
    with opened(db, create=False) as book:
        _print_list(
            "bets",
            lambda before, limit: book.bets(user, pool, state, limit=limit, before=before),
            options,
            views.BET_COLUMNS,
            views.bet_row_text,
        )


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


# --- reconciliation ------------------------------------------------------------------------------


@main.command()
@db_option
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--pools-only",
    is_flag=True,
    help="Compare with the books of the file's pools only (the rest is not 'missing').",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report and every difference.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the differing bets as CSV.")
def reconcile(db: str, file: str, pools_only: bool, as_json: bool, as_csv: bool) -> None:
    """Compare FILE, the platform's record of its bets, with the books (reads only).

    FILE is CSV, TSV, a JSON array or JSON lines ('-' for standard input), with the columns uid,
    user, pool, amount, rake, currency, payout, payout_currency, status. Exit status 0 when
    they agree, 1 on any difference, 2 when the file or the books cannot be read.
    """
    if as_json and as_csv:
        _reconcile_error("usage", "--json and --csv exclude each other")
    source = sys.stdin.buffer if file == "-" else file
    try:
        book = open_ledger(
            db, currencies=CurrencyTable.from_env(os.environ), create=False, group_commit=False
        )
    except (LedgerError, ValueError) as error:
        _reconcile_error(getattr(error, "key", "usage"), getattr(error, "message", str(error)))
    try:
        with book, book.reconcile(source, pools_only=pools_only) as found:
            chunks: Iterable[str]
            if as_json:
                chunks = found.json_chunks()
            elif as_csv:
                chunks = found.csv_chunks()
            else:
                chunks = (line + "\n" for line in found.text_lines())
            for chunk in chunks:
                click.echo(chunk, nl=False)
            if as_json:
                click.echo()
    except LedgerError as error:
        _reconcile_error(error.key, error.message)
    sys.exit(0 if found.ok else 1)


def _reconcile_error(key: str, message: str) -> NoReturn:
    # Exit 2, not 1: 1 means "the books and the file differ", which a script acts on.
    click.echo(f"error: {key}: {message}", err=True)
    sys.exit(2)


@main.group(invoke_without_command=True)
@db_option
@click.option("--request-id", help="Only deliveries with this X-Request-Id.")
@click.option("--bet", help="Only deliveries that named this bet uid (among their first 20).")
@click.option("--status", help="Only deliveries answered this HTTP status.")
@click.option("--event", help="Only this X-Callback-Event (bet:place, bet:cancel, ...).")
@click.option("--since", help="Received at or after this ISO-8601 time (UTC if no zone).")
@click.option("--until", help="Received before this ISO-8601 time (UTC if no zone).")
@click.option("--limit", default=DEFAULT_LIMIT, show_default=True, help="Page size (1 to 1000).")
@click.option("--before", help="The cursor the previous page printed.")
@click.option("--json", "as_json", is_flag=True, help="Print one page as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every matching delivery as CSV.")
@click.pass_context
def deliveries(
    ctx: click.Context,
    db: str,
    request_id: str | None,
    bet: str | None,
    status: str | None,
    event: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    before: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """The callback delivery journal, newest first (``prune`` deletes old rows)."""
    if ctx.invoked_subcommand is not None:
        return
    wanted = DeliveryFilter.parse(
        request_id=request_id, bet=bet, status=status, event=event, since=since, until=until
    )
    with opened(db, create=False) as book:
        if as_csv:
            rows = every(lambda after: book.deliveries(wanted, limit=EXPORT_PAGE, before=after))
            for chunk in csv_lines(map(views.delivery_dict, rows), views.DELIVERY_COLUMNS):
                click.echo(chunk, nl=False)
            return
        page = book.deliveries(wanted, limit=limit, before=before)
    if as_json:
        emit(views.deliveries_dict(page.items, page.next))
        return
    if not page.items:
        click.echo("no deliveries")
    for item in page.items:
        click.echo(views.delivery_text(item))
    if page.next is not None:
        click.echo(f"next page: --before {page.next}")


@deliveries.command("prune")
@db_option
@click.option(
    "--days",
    envvar="LEDGER_DELIVERY_RETENTION_DAYS",
    default=DEFAULT_RETENTION_DAYS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Retention: delete the rows received more than this many days ago.",
)
def deliveries_prune(db: str, days: int) -> None:
    """Delete journal rows older than the retention, a batch per transaction."""
    with opened(db, create=False) as book:
        gone = book.prune_deliveries(days)
    click.echo(f"pruned {gone} deliveries received more than {days} days ago")


@main.group(invoke_without_command=True)
@db_option
@click.option("--after", default=0, show_default=True, help="The last event id already read.")
@click.option("--limit", default=DEFAULT_LIMIT, show_default=True, help="At most (1 to 1000).")
@click.option("--types", help="Only these types, comma-separated (bet.placed,deposit,...).")
@click.option("--follow", is_flag=True, help="Keep printing events as they commit (Ctrl-C).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.pass_context
def events(
    ctx: click.Context,
    db: str,
    after: int,
    limit: int,
    types: str | None,
    follow: bool,
    as_json: bool,
) -> None:
    """The event feed in commit order, after an id (``prune`` deletes old events)."""
    if ctx.invoked_subcommand is not None:
        return

    def show(event: feed.Event) -> None:
        if as_json:
            emit(feed.event_dict(event))
        else:
            click.echo(feed.event_text(event))

    with opened(db, create=False) as book:
        page = book.events(after, limit=limit, types=types)
        for event in page.events:
            show(event)
        if not follow:
            if not as_json and len(page.events) == limit:
                click.echo(f"more: --after {page.next}")
            return
        # Ctrl-C (or SIGTERM) only asks the loop to stop; it is not raised wherever the main
        # thread happens to be. A KeyboardInterrupt inside the connection pool could leave its
        # lock taken, and closing the ledger then hung (seen on a loaded machine).
        stop = threading.Event()
        handlers = {
            number: signal.signal(number, lambda *_: stop.set())
            for number in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            while not stop.is_set():
                # Short waits, so that a stop is seen within a second.
                page = book.wait_for_events(page.next, wait=FOLLOW_WAIT, limit=limit, types=types)
                for event in page.events:
                    show(event)
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)


@events.command("prune")
@db_option
@click.option(
    "--days",
    envvar="LEDGER_EVENT_RETENTION_DAYS",
    default=feed.DEFAULT_RETENTION_DAYS,
    show_default=True,
    type=click.IntRange(min=1),
    help="Retention: delete the events committed more than this many days ago.",
)
@click.option(
    "--ignore-webhooks",
    is_flag=True,
    help="Also delete events a webhook endpoint has not received yet (it never will).",
)
def events_prune(db: str, days: int, ignore_webhooks: bool) -> None:
    """Delete events older than the retention, a batch of transactions' events at a time.

    Events a webhook endpoint has not received yet are kept, whatever their age, unless
    --ignore-webhooks; `ledger webhooks forget NAME` drops an endpoint that is gone for good.
    """
    with opened(db, create=False) as book:
        gone = book.prune_events(days, keep_undelivered=not ignore_webhooks)
        slowest = None if ignore_webhooks else book.slowest_webhook()
    click.echo(f"pruned {gone} events committed more than {days} days ago")
    if slowest is not None:
        name, cursor = slowest
        click.echo(
            f"kept every event after {cursor}: webhook endpoint {name!r} has not received them "
            f"(`ledger webhooks forget {name}` if it is gone for good)"
        )


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

# ``ledger webhooks status`` (ledger.webhook_commands), on this module's helpers likewise.
from .webhook_commands import COMMANDS as _WEBHOOK_COMMANDS  # noqa: E402

for _command in _WEBHOOK_COMMANDS:
    main.add_command(_command)

# ``ledger db backup DEST`` (ledger.backup): a checked copy of a live SQLite ledger.
from .backup import command as _BACKUP_COMMAND  # noqa: E402

db.add_command(_BACKUP_COMMAND)

# ``ledger db copy TARGET`` (ledger.store_copy): a SQLite ledger moved whole into Postgres.
from .store_copy import command as _COPY_COMMAND  # noqa: E402

db.add_command(_COPY_COMMAND)
