"""``ledger reconcile``: the platform's record of its bets against the books."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import NoReturn

import click

from ..currencies import CurrencyTable
from ..errors import LedgerError
from ..service import open_ledger
from .common import db_option


@click.command()
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
