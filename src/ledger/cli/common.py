"""What every ``ledger`` command shares: ``--db``, opening the ledger, errors, and printing.

Errors print ``error: <key>: <message>`` on stderr and exit 1; ``--json`` prints one line of
JSON, in the shapes of :mod:`ledger.views`; ``--csv`` streams every page, a page at a time.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO, TypeVar

import click

from ..errors import LedgerError
from ..paging import DEFAULT_LIMIT, EXPORT_PAGE, MAX_LIMIT, Page, csv_lines, every

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
def short_secret_warning() -> Iterator[None]:
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


def pages(first: Page[Any], read: Callable[[str], Page[Any]]) -> Iterator[dict[str, Any]]:
    """The items of ``first`` and of every page after it, as dicts, read as they are needed."""
    page = first
    while True:
        yield from (item.to_dict() for item in page.items)
        if page.next is None:
            return
        page = read(page.next)


def write_csv(rows: Iterator[dict[str, Any]], columns: Sequence[str]) -> None:
    for text in csv_lines(rows, columns):
        click.echo(text, nl=False)


def list_options(function: F) -> F:
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


def print_list(
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


def show(data: dict[str, Any], lines: list[str], as_json: bool) -> None:
    if as_json:
        emit(data)
        return
    for line in lines:
        click.echo(line)
