"""The directory from the command line: tournaments, users and bets as the platform named them."""

from __future__ import annotations

from typing import Any

import click

from .. import views
from ..errors import BetNotFound, TournamentNotFound, UserNotFound
from .common import db_option, emit, fail, list_options, print_list, show
from .opening import opened


@click.command()
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


@click.command()
@db_option
@click.option("--status", help="Only tournaments whose last status seen is this one.")
@click.option("--search", help="Case-insensitive substring of the name or the uid.")
@list_options
def tournaments(db: str, status: str | None, search: str | None, **options: Any) -> None:
    """List tournaments as the platform described them, newest first."""
    with opened(db, create=False) as book:
        print_list(
            "tournaments",
            lambda before, limit: book.tournaments(status, search, limit=limit, before=before),
            options,
            views.TOURNAMENT_COLUMNS,
            views.tournament_row_text,
        )


@click.command()
@db_option
@click.argument("uid", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tournament(db: str, uid: int, as_json: bool) -> None:
    """Show tournament UID with its report per currency."""
    with opened(db, create=False) as book:
        found = book.tournament(uid)
    if found is None:
        fail(TournamentNotFound(f"tournament {uid} is unknown"))
    show(found.to_dict(), views.tournament_lines(found), as_json)


@click.command()
@db_option
@click.option("--search", help="Case-insensitive substring of the uid or the name.")
@list_options
def users(db: str, search: str | None, **options: Any) -> None:
    """List users as the platform described them, newest first."""
    with opened(db, create=False) as book:
        print_list(
            "users",
            lambda before, limit: book.users(search, limit=limit, before=before),
            options,
            views.USER_COLUMNS,
            views.user_row_text,
        )


@click.command()
@db_option
@click.argument("uid")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def user(db: str, uid: str, as_json: bool) -> None:
    """Show user UID with their balances."""
    with opened(db, create=False) as book:
        found = book.user(uid)
    if found is None:
        fail(UserNotFound(f"user {uid} is unknown"))
    show(found.to_dict(), views.user_lines(found), as_json)


@click.command()
@db_option
@click.option("--user", help="Only this user's bets.")
@click.option("--pool", type=int, help="Only this tournament's bets.")
@click.option(
    "--state", type=click.Choice(["placed", "refunded", "settled"]), help="Only this state."
)
@list_options
def bets(db: str, user: str | None, pool: int | None, state: str | None, **options: Any) -> None:
    """List bets, highest uid first."""
    with opened(db, create=False) as book:
        print_list(
            "bets",
            lambda before, limit: book.bets(user, pool, state, limit=limit, before=before),
            options,
            views.BET_COLUMNS,
            views.bet_row_text,
        )
