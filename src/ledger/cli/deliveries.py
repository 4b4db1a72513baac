"""``ledger deliveries``: the callback delivery journal."""

from __future__ import annotations

import click

from .. import views
from ..deliveries import DEFAULT_RETENTION_DAYS, DeliveryFilter
from ..paging import DEFAULT_LIMIT, EXPORT_PAGE, csv_lines, every
from .common import db_option, emit
from .opening import opened


@click.group(invoke_without_command=True)
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
