"""``ledger limits set|remove|cancel|show`` and ``ledger exclude``: a player's responsible-gambling
limits and exclusions, as the operator API's ``/admin/users/{uid}/limits`` and ``/exclusions``.

Changes go through the ledger's writer in the database's own transaction, like a deposit; a
higher limit or a removal waits ``LEDGER_LIMIT_COOLING_OFF`` (default 24 h).
"""

from __future__ import annotations

import os
from typing import Any

import click

from ..errors import LedgerError
from ..service import parse_instant
from ..settings import SettingsError, limit_options
from ..views.limits import exclusion_text, limit_text
from .common import db_option, emit, fail
from .opening import opened

KIND = click.Choice(["deposit", "stake", "loss"])
PERIOD = click.Choice(["day", "week", "month"])
BY = click.option(
    "--by",
    default="operator",
    show_default=True,
    help="Who asked: 'user' when the player did, else the operator's name.",
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _options() -> dict[str, Any]:
    try:
        return limit_options(os.environ)
    except SettingsError as error:
        fail(error)


@click.group()
def limits() -> None:
    """A player's deposit, stake and loss limits: set, remove, cancel a pending change, show."""


@limits.command("set")
@db_option
@click.argument("user")
@click.argument("currency")
@click.argument("kind", type=KIND)
@click.argument("period", type=PERIOD)
@click.argument("amount")
@BY
@JSON
def set_limit(
    db: str, user: str, currency: str, kind: str, period: str, amount: str, by: str, as_json: bool
) -> None:
    """Set USER's KIND limit per PERIOD in CURRENCY to AMOUNT (a raise waits the cooling-off)."""
    with opened(db, **_options()) as book:
        view = book.set_limit(user, currency, kind, period, amount, by=by)
    emit(view.to_dict()) if as_json else click.echo(limit_text(view))


@limits.command("remove")
@db_option
@click.argument("user")
@click.argument("currency")
@click.argument("kind", type=KIND)
@click.argument("period", type=PERIOD)
@BY
@JSON
def remove_limit(
    db: str, user: str, currency: str, kind: str, period: str, by: str, as_json: bool
) -> None:
    """Remove USER's KIND limit per PERIOD in CURRENCY (in force until the cooling-off ends)."""
    with opened(db, **_options()) as book:
        view = book.remove_limit(user, currency, kind, period, by=by)
    emit(view.to_dict()) if as_json else click.echo(limit_text(view))


@limits.command("cancel")
@db_option
@click.argument("user")
@click.argument("currency")
@click.argument("kind", type=KIND)
@click.argument("period", type=PERIOD)
@BY
def cancel(db: str, user: str, currency: str, kind: str, period: str, by: str) -> None:
    """Cancel the pending raise or removal of USER's KIND limit per PERIOD in CURRENCY."""
    with opened(db, **_options()) as book:
        view = book.cancel_pending(user, currency, kind, period, by=by)
    click.echo("no such limit" if view is None else limit_text(view))


@limits.command("show")
@db_option
@click.argument("user")
@JSON
def show(db: str, user: str, as_json: bool) -> None:
    """USER's limits with their use in the window and the room left, and exclusions."""
    with opened(db, create=False) as book:
        found, excluded = book.limits(user), book.exclusions(user)
    if as_json:
        emit(
            {
                "user": user,
                "limits": [view.to_dict() for view in found],
                "exclusions": [view.to_dict() for view in excluded],
            }
        )
        return
    if not found and not excluded:
        click.echo(f"user {user}: no limit, no exclusion")
    for view in found:
        click.echo(limit_text(view))
    for item in excluded:
        click.echo(exclusion_text(item))


@click.command()
@db_option
@click.argument("user")
@click.option("--until", help="ISO 8601 instant with its zone; without it, indefinite.")
@click.option("--reason", required=True, help="Why (a time-out, a self-exclusion...).")
@click.option(
    "--lift",
    is_flag=True,
    help="End USER's exclusion early instead: an administrator's act, --reason recorded.",
)
@BY
@JSON
def exclude(
    db: str, user: str, until: str | None, reason: str, lift: bool, by: str, as_json: bool
) -> None:
    """Exclude USER from betting and depositing until --until, or indefinitely."""
    if lift:
        if until is not None:
            fail(LedgerError("--lift takes no --until", key="request.invalid"))
        with opened(db) as book:
            ended = book.lift_exclusion(user, reason=reason, by=by)
        if as_json:
            emit({"user": user, "ended": ended})
        else:
            click.echo(f"user {user}: {ended} exclusion(s) ended")
        return
    try:
        moment = None if until is None else parse_instant(until, "until")
    except LedgerError as error:
        fail(error)
    with opened(db) as book:
        view = book.exclude(user, moment, reason=reason, by=by)
    emit({"user": user, **view.to_dict()}) if as_json else click.echo(exclusion_text(view))
