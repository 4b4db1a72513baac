"""``ledger db copy TARGET``: move a SQLite ledger into an empty Postgres database, whole.

Every table of the ledger's schema is copied row by row with its ids (the journal, the bets and
their open holds, the delivery journal, the event feed and its counter, the directory, the
console's operators and audit log, the webhook cursors), in one Postgres transaction: either
the whole ledger arrives, or nothing does. Postgres's own guards check what arrives as they
check every write (each transaction's postings sum to zero, no posting without its
transaction, no negative balance), then the id sequences are moved past the copied ids, and the
copy is proven by the same check as ``ledger check``.

The source must not change meanwhile: stop the servers of the SQLite ledger first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Table, delete, func, insert, select, text

from .errors import LedgerError
from .service import open_ledger
from .stores import open_store
from .stores.base import CheckReport
from .stores.schema import metadata
from .stores.sql import SqlStore

__all__ = ["CopyResult", "copy_sqlite_to_postgres"]

CHUNK = 5_000

# Sequences the Postgres store draws ids from, and the column whose ids they hand out.
SEQUENCES = {
    "transaction_ids": ("transactions", "id"),
    "delivery_ids": ("deliveries", "id"),
    "event_groups": ("events", "grp"),
}
# The event feed's counter and the journal chain's head: one row a new schema already holds,
# replaced by the source's.
COUNTERS = ("event_counter", "journal_head")
# Columns whose ids Postgres assigns itself (a sequence of their own).
SERIALS = (("postings", "id"), ("operator_audit", "id"))


@dataclass(frozen=True, slots=True)
class CopyResult:
    """How many rows of each table were copied, and what the check said of the copy."""

    rows: dict[str, int]
    report: CheckReport


def tables() -> list[Table]:
    """The schema's tables in an order Postgres accepts: a transaction's postings before it."""
    ordered = [table for table in metadata.sorted_tables]
    names = [table.name for table in ordered]
    postings = ordered.pop(names.index("postings"))
    ordered.insert([table.name for table in ordered].index("transactions"), postings)
    return ordered


def copy_sqlite_to_postgres(source_url: str, target_url: str) -> CopyResult:
    """Copy the SQLite ledger ``source_url`` into the empty Postgres ledger ``target_url``
    (``ledger db upgrade`` has made its schema). Raises :class:`LedgerError` and copies nothing
    when the target is not empty or either URL is not of its kind."""
    if not source_url.startswith("sqlite"):
        raise LedgerError(f"the source must be a SQLite ledger, not {source_url!r}", key="usage")
    if not target_url.startswith(("postgres://", "postgresql")):
        raise LedgerError(
            f"the target must be a Postgres database, not {target_url!r}", key="usage"
        )
    source = open_store(source_url, migrate=False, create=False)
    try:
        target = open_store(target_url, migrate=False)
        try:
            assert isinstance(source, SqlStore)
            assert isinstance(target, SqlStore)
            rows = _copy(source, target)
        finally:
            target.close()
    finally:
        source.close()
    book = open_ledger(target_url, migrate=False, group_commit=False)
    try:
        report = book.check()
    finally:
        book.close()
    return CopyResult(rows, report)


def _copy(source: SqlStore, target: SqlStore) -> dict[str, int]:
    with (
        source.translate_errors(),
        target.translate_errors(),
        source.engine.connect() as reading,
        target.engine.begin() as writing,
    ):
        _require_empty(writing)
        rows = {table.name: _copy_table(table, reading, writing) for table in tables()}
        _move_sequences(writing)
    return rows


def _require_empty(connection: Connection) -> None:
    for table in tables():
        if table.name in COUNTERS:
            continue
        if connection.execute(select(func.count()).select_from(table)).scalar():
            raise LedgerError(
                f"the target database already holds rows in {table.name}: copy into an empty "
                "database that `ledger db upgrade` has just made",
                key="copy.target_not_empty",
            )


def _copy_table(table: Table, reading: Connection, writing: Connection) -> int:
    if table.name in COUNTERS:
        writing.execute(delete(table))
    count = 0
    for chunk in _chunks(table, reading):
        writing.execute(insert(table), chunk)
        count += len(chunk)
    return count


def _chunks(table: Table, reading: Connection) -> Iterator[list[dict[str, Any]]]:
    query = select(table).order_by(*table.primary_key.columns)
    result = reading.execution_options(stream_results=True, yield_per=CHUNK).execute(query)
    for part in result.mappings().partitions(CHUNK):
        yield [{key: _aware(value) for key, value in row.items()} for row in part]


def _aware(value: Any) -> Any:
    # SQLite keeps the ledger's UTC times without their zone; Postgres's columns carry it.
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _move_sequences(connection: Connection) -> None:
    for sequence, (table, column) in SEQUENCES.items():
        _set(connection, f"'{sequence}'", table, column)
    # A group the journal's chain names is never drawn again, though its events were pruned.
    connection.execute(
        text(
            "SELECT setval('event_groups', greatest((SELECT last_value FROM event_groups), "
            "coalesce((SELECT max(grp) FROM journal_chain), 0) + 1), false)"
        )
    )
    for table, column in SERIALS:
        _set(connection, f"pg_get_serial_sequence('{table}', '{column}')", table, column)


def _set(connection: Connection, sequence: str, table: str, column: str) -> None:
    # The next id drawn is past every copied one (or 1 on an empty table).
    connection.execute(
        text(
            f"SELECT setval({sequence}, coalesce((SELECT max({column}) FROM {table}), 0) + 1, "  # noqa: S608
            "false)"
        )
    )
