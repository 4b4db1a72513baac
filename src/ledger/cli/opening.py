"""Opening the ledger for a command: ledger errors become ``error: <key>: <message>``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..currencies import CurrencyTable
from ..errors import LedgerError
from ..service import Ledger, open_ledger
from .common import fail


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
