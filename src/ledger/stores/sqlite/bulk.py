"""SQLite's bulk inserts as multi-row INSERTs, cut to what one statement may bind.

Invariant: the rows written, and their order, are those of one INSERT per row; no statement
binds more parameters than the connection allows. Tested by
tests/stores/test_sqlite_multi_row.py."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

# Rows per multi-row INSERT at most: past a few hundred, a statement saves nothing more.
MULTI_ROW = 512


def largest_statement(driver: sqlite3.Connection, width: int) -> int:
    """The most rows of ``width`` columns one INSERT takes: a power of two, at most
    :data:`MULTI_ROW`, within the connection's limit on parameters (999 before SQLite 3.32)."""
    fits = max(1, driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width)
    return 1 << (min(MULTI_ROW, fits).bit_length() - 1)


def multi_row_chunks(
    rows: Sequence[tuple[Any, ...]], largest: int
) -> Iterator[tuple[int, list[list[Any]]]]:
    """``rows`` as the parameters of multi-row INSERTs: ``(rows per statement, [flattened
    parameters of each statement])``, the largest statements first, then at most one of each
    smaller power of two (so that a handful of statement shapes serve every row count, and
    the driver's statement cache compiles each once)."""
    full = len(rows) - len(rows) % largest
    if full:
        flat = chain.from_iterable
        yield largest, [list(flat(rows[at : at + largest])) for at in range(0, full, largest)]
    start, size = full, largest
    while start < len(rows):
        size >>= 1
        if len(rows) - start >= size:
            yield size, [list(chain.from_iterable(rows[start : start + size]))]
            start += size


@functools.cache
def multi_row_insert(head: str, width: int, size: int, upsert: str | None) -> str:
    """``head VALUES (?, ...), ...`` for ``size`` rows of ``width`` columns, then ``upsert``."""
    row = f"({', '.join('?' * width)})"
    sql = f"{head} VALUES {', '.join([row] * size)}"
    return sql if upsert is None else f"{sql} {upsert}"


def streamed_batches(
    rows: Iterable[tuple[Any, ...]], size: int, rest: list[tuple[Any, ...]]
) -> Iterator[tuple[Any, ...]]:
    """The flattened parameters of each full batch of ``size`` of ``rows``, consumed as they
    stream (for ``executemany`` of a ``size``-row INSERT); the rows after the last full batch
    are left in ``rest``."""
    flat, stream = chain.from_iterable, iter(rows)
    while batch := list(islice(stream, size)):
        if len(batch) < size:
            rest.extend(batch)
            return
        yield tuple(flat(batch))
