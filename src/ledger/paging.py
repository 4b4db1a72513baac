"""Cursor paging and CSV export, shared by every list the ledger answers (library, CLI, HTTP).

A list is read newest first in pages of at most ``limit`` items. A page carries an opaque cursor
(``next``) naming where the next page starts; reading it back with :func:`position` gives the
keyset key the store continues from (``WHERE key < :position ORDER BY key DESC``), so a page is
one index range scan however deep it is, and a list being written meanwhile never repeats or
skips an item. An export walks every page (:func:`every`) and writes CSV as it goes
(:func:`csv_lines`), so a year of a busy user's statement never sits in memory.

Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .csv_safe import neutralise
from .errors import InvalidRequest

__all__ = [
    "DEFAULT_LIMIT",
    "EXPORT_PAGE",
    "MAX_LIMIT",
    "Page",
    "check_limit",
    "csv_lines",
    "cursor",
    "every",
    "page_of",
    "position",
]

T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
EXPORT_PAGE = 1000  # items per page read by an export

Key = tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list, newest first, and the cursor of the next (``None``: the last page)."""

    items: list[T]
    next: str | None


def cursor(*key: int | str) -> str:
    """The opaque cursor of a keyset position (for example ``(created_at_iso, id)``)."""
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def position(text: str | None, *kinds: type) -> Key | None:
    """Read a cursor back: the key it names, whose parts must be of ``kinds``, or ``None``.

    A cursor that was not made by :func:`cursor` with parts of these kinds is a 400
    ``request.invalid_cursor``, never a database error.
    """
    if text is None or text == "":
        return None
    try:
        if len(text) > 1024:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        key = json.loads(raw)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest("not a cursor this API gave", key="request.invalid_cursor") from None
    if (
        not isinstance(key, list)
        or len(key) != len(kinds)
        or not all(
            isinstance(part, kind) and not isinstance(part, bool) and _storable(part)
            for part, kind in zip(key, kinds, strict=True)
        )
    ):
        raise InvalidRequest("not a cursor this API gave", key="request.invalid_cursor")
    return tuple(key)


def _storable(part: Any) -> bool:
    # What a key column can hold on both stores: a 64-bit integer (beyond it Postgres refuses
    # the comparison, a 5xx), text without NUL (Postgres' text cannot hold one).
    if isinstance(part, int):
        return -(2**63) <= part < 2**63
    return not (isinstance(part, str) and "\x00" in part)


def check_limit(limit: int, maximum: int = MAX_LIMIT) -> int:
    """A page size between 1 and ``maximum``, else a 400."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidRequest(f"limit must be between 1 and {maximum}")
    return limit


def page_of(rows: Sequence[T], limit: int, key: Callable[[T], Key]) -> Page[T]:
    """A page from ``limit + 1`` rows read: the extra row only says that there is a next page."""
    items = list(rows[:limit])
    more = len(rows) > limit and bool(items)
    return Page(items, cursor(*key(items[-1])) if more else None)


def every(read: Callable[[str | None], Page[T]]) -> Iterator[T]:
    """Every item of a list, reading it page by page (for exports)."""
    after: str | None = None
    while True:
        page = read(after)
        yield from page.items
        if page.next is None:
            return
        after = page.next


def csv_lines(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> Iterator[str]:
    """CSV text, a header line and then one line per row, produced as the rows arrive; no cell
    a spreadsheet would read as a formula (:mod:`ledger.csv_safe`)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({name: _cell(row.get(name)) for name in columns})
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue()


def _cell(value: Any) -> Any:
    # Nested values (secrets, bet uid lists) become JSON text in one cell.
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, separators=(",", ":"), default=str)
    # Text that a spreadsheet would run as a formula is written as text (OWASP's rule).
    return "" if value is None else neutralise(value)
