"""``ledger webhooks status``: where each configured endpoint's delivery stands.

It reads ``LEDGER_WEBHOOKS`` (the server's configuration: the endpoints' names and URLs) and the
database's cursors; it sends nothing, so it runs anywhere the database is reachable.
"""

from __future__ import annotations

import os

import click

from ..errors import LedgerError
from ..webhooks import (
    WebhookConfigError,
    cursors,
    ledger_feed,
    masked_url,
    parse_config,
    statuses,
)
from .common import db_option, emit, fail
from .opening import opened

INVALID = "config.invalid"  # the key `ledger serve` refuses a bad configuration with


@click.group()
def webhooks() -> None:
    """Signed webhooks (configured by LEDGER_WEBHOOKS; sent by `ledger serve`)."""


@webhooks.command("status")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(db: str, as_json: bool) -> None:
    """Each endpoint's cursor, lag, last success, last error and current sender."""
    text = os.environ.get("LEDGER_WEBHOOKS", "").strip()
    if not text:
        fail(
            LedgerError(
                "LEDGER_WEBHOOKS is not set: no endpoint to report on", key="config.invalid"
            )
        )
    try:
        config = parse_config(text)
    except WebhookConfigError as exc:
        fail(LedgerError(str(exc), key=INVALID))
    with opened(db, create=False) as book:
        found = statuses(book, config, ledger_feed(book))
    if as_json:
        emit({"endpoints": [item.to_dict() for item in found]})
        return
    for item in found:
        data = item.to_dict()
        click.echo(
            f"{item.name}  cursor={item.cursor} head={item.head} lag={item.lag_events} events "
            f"({data['lag_seconds']} s)  attempts={item.attempts}  holder={item.holder or '-'}"
        )
        click.echo(f"  url={masked_url(item.url)}")
        click.echo(f"  last success: {data['last_success_at'] or 'never'}")
        if item.last_error is not None:
            click.echo(f"  last error: {data['last_error_at']} {item.last_error}")


@webhooks.command("forget")
@db_option
@click.argument("name")
def forget(db: str, name: str) -> None:
    """Drop endpoint NAME's cursor (an endpoint removed from LEDGER_WEBHOOKS for good).

    Its cursor no longer keeps `ledger events prune` from deleting what it never received. An
    endpoint still configured starts again from event 0 when a server next runs.
    """
    with opened(db, create=False) as book:
        found = cursors(book).forget(name)
    if not found:
        fail(
            LedgerError(f"no webhook endpoint named {name!r} has a cursor", key="webhook.not_found")
        )
    click.echo(f"forgot webhook endpoint {name!r}")
