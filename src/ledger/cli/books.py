"""The books from the command line: money in and out, balances, statements, holds, the
house's report and the journal's check. The reads never create a database."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import click

from .. import views
from ..paging import EXPORT_PAGE, Page
from ..service import parse_instant
from ..settings import SettingsError, stale_hold_options
from ..views import HoldView
from .common import db_option, emit, fail, pages, write_csv
from .opening import opened


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


deposit = click.command("deposit", help="Credit USER with AMOUNT of CURRENCY from outside.")(
    _movement("deposit")
)
withdraw = click.command(
    "withdraw", help="Pay AMOUNT of CURRENCY out of USER's available balance."
)(_movement("withdrawal"))


@click.command()
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


@click.command()
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
            lines = pages(
                first,
                lambda after: book.statement_page(user, currency, limit=EXPORT_PAGE, before=after),
            )
            write_csv(lines, views.STATEMENT_COLUMNS)
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


@click.command()
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
            write_csv(pages(first, lambda after: read(after, EXPORT_PAGE)), views.HOLD_COLUMNS)
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


@click.command()
@db_option
@click.option("--since", default=None, help="From this moment (inclusive), ISO 8601 with a zone.")
@click.option("--until", default=None, help="Until this moment (exclusive), ISO 8601 with a zone.")
@click.option("--currency", default=None, help="Only this currency.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def house(
    db: str, since: str | None, until: str | None, currency: str | None, as_json: bool
) -> None:
    """Show the house accounts per currency, and what the house earned over a period.

    Over the period: deposits, withdrawals, stakes captured, rake earned, prizes paid,
    ticket-funded entries, refunds, entries and players.
    """
    with opened(db, create=False) as book:
        report = book.house(since, until, currency)
    if as_json:
        emit(report.to_dict())
        return
    for line in views.house_lines(report):
        click.echo(line)


@click.command()
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
