"""Cells of a CSV export that a spreadsheet would not run as a formula (OWASP, CSV Injection).

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by Excel,
LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)``, ``@SUM(...)``, DDE), so text that
came from outside (a user's uid or name, a tournament's name, a deposit's reference, a request
id, the name tried at a failed sign-in) is written with a leading ``'``, which the spreadsheet
shows as text and does not display. A number stays a number: a cell that is exactly a decimal
(``-5.00``, ``+3``, ``-0.5``) is no formula and is left untouched, so every amount, negative ones
included, is exported exactly as the ledger rendered it.

Every CSV the ledger writes goes through :func:`ledger.paging.csv_lines`, which applies this.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["TRIGGERS", "neutralise"]

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")

_NUMBER = re.compile(r"[+-]?[0-9]+(\.[0-9]+)?")


def neutralise(value: Any) -> Any:
    """``value``, with a ``'`` before it if it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(TRIGGERS) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value
