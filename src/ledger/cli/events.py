"""``ledger events``: the event feed in commit order."""

from __future__ import annotations

import signal
import threading

import click

from .. import events as feed
from ..paging import DEFAULT_LIMIT
from .common import db_option, emit
from .opening import opened

# Seconds `ledger events --follow` waits for an event before looking whether it was stopped.
FOLLOW_WAIT = 1.0


@click.group(invoke_without_command=True)
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
        # The limits' activity beyond the longest window (30 days), which no check reads.
        book.prune_limit_activity()
        slowest = None if ignore_webhooks else book.slowest_webhook()
    click.echo(f"pruned {gone} events committed more than {days} days ago")
    if slowest is not None:
        name, cursor = slowest
        click.echo(
            f"kept every event after {cursor}: webhook endpoint {name!r} has not received them "
            f"(`ledger webhooks forget {name}` if it is gone for good)"
        )
