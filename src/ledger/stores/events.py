"""The event feed's SQL: appending rows, numbering them at commit, reading and pruning them.

Plain functions over an open connection, called by the unit of work (:mod:`.sql`).

Why ids follow commit order on Postgres, where a sequence would not (a transaction that drew a
lower number can commit after one that drew a higher): the ids are handed out by :func:`seal`,
the last statement before commit, from the one ``event_counter`` row. Updating it takes that
row's lock until commit, so transactions with events pass that point one at a time and each
gets the ids after those of every transaction that committed before it; a waiting writer's
update returns only after the holder has committed (and become visible) or rolled back (its
update, and so its ids, undone: no gaps). A reader that has seen id N has seen every commit
before N's; every later commit gets ids above N. Only the tail of each transaction is serialised
(one single-row update, one insert and the commit: the checks Postgres defers to commit, the
balancing trigger and the postings' foreign keys, are run just before, with ``SET CONSTRAINTS ALL
IMMEDIATE``), and the event rows themselves are written earlier, as
the change is made, keyed by ``(grp, ordinal)``: a million-participant settle never renumbers a
million rows under the lock. SQLite has one writer at a time; the same code holds there.

Measured (benchmarks/write_path_cpu.py, see docs/performance.md): the feed's cost is the
rows themselves; the counter is one statement per commit, and a group commit has one commit per
batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from ..events import ROW_COLUMNS, EventRow
from .dialect import Dialect
from .schema import event_commits, event_counter, events, webhook_cursors

__all__ = ["append", "last_id", "list_events", "prune", "seal", "seal_in_steps"]

COLUMNS = ("grp", "ordinal", *ROW_COLUMNS)

# Written with "?" placeholders, swapped for the driver's own (see seal).
_TAKE_IDS = "UPDATE event_counter SET last_id = last_id + ? WHERE id = 1 RETURNING last_id"
_COMMIT_COLUMNS = ("grp", "first_id", "last_id", "committed_at")


def append(
    connection: Connection, dialect: Dialect, grp: int, first: int, rows: Sequence[EventRow]
) -> None:
    """Write ``rows`` as ordinals ``first, first + 1, ...`` of group ``grp`` (one bulk insert)."""
    dialect.insert_rows(
        connection,
        events,
        COLUMNS,
        [(grp, ordinal, *row) for ordinal, row in enumerate(rows, first)],
    )


def seal(connection: Connection, dialect: Dialect, grp: int, count: int) -> None:
    """Give the ``count`` events of ``grp`` their ids; the last statement before commit."""
    # Deferred checks first: the counter's lock below is held until commit, and a huge settle's
    # checks must not run while every other writer with events waits on it.
    dialect.check_deferred(connection)
    dialect.seal_events(connection, grp, count, datetime.now(UTC))


def seal_in_steps(
    connection: Connection, dialect: Dialect, grp: int, count: int, at: datetime
) -> None:
    """:meth:`~ledger.stores.dialect.Dialect.seal_events` as two statements, the counter's new
    value read back in between (SQLite, whose SQL has no write inside a query). Plain SQL, not
    SQLAlchemy Core: it runs once per commit, and building two Core statements cost more than
    the database's work (a third of the feed's CPU on one-entry Place Bets, measured with
    benchmarks/write_path_cpu.py).
    """
    # The driver's placeholder: qmark on sqlite3, format on psycopg.
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    # All of it fetched: a RETURNING statement stepped only once would still be running.
    rows = dialect.run(connection, _TAKE_IDS.replace("?", mark), (count,)).fetchall()
    last = rows[0][0] if rows else None
    if last is None:
        # A schema made without the migration's row (e.g. from the metadata): the first writer
        # creates it; a concurrent first writer then fails on its key and is re-run (Retry).
        last = count
        connection.execute(insert(event_counter).values(id=1, last_id=last))
    first = int(last) - count + 1
    dialect.insert_rows(
        connection,
        event_commits,
        _COMMIT_COLUMNS,
        [(grp, first, int(last), dialect.timestamp(at))],
    )


def slowest_cursor(connection: Connection) -> tuple[str, int] | None:
    """The webhook endpoint whose cursor stands lowest, and where (None: no endpoint)."""
    row = connection.execute(
        select(webhook_cursors.c.endpoint, webhook_cursors.c.position)
        .order_by(webhook_cursors.c.position, webhook_cursors.c.endpoint)
        .limit(1)
    ).first()
    return None if row is None else (row.endpoint, int(row.position))


def _utc(moment: datetime) -> datetime:
    # SQLite hands timestamps back without a zone; they were written in UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def list_events(
    connection: Connection, after: int, limit: int, types: Sequence[str] | None
) -> list[tuple[int, datetime, EventRow]]:
    """Up to ``limit`` events with ids above ``after``, in id order."""
    c, e = event_commits.c, events.c
    event_id = (c.first_id + e.ordinal).label("id")
    query = (
        select(event_id, c.committed_at, *(e[name] for name in ROW_COLUMNS))
        .select_from(event_commits.join(events, e.grp == c.grp))
        .where(c.last_id > after, c.first_id + e.ordinal > after)
        .order_by(c.last_id, e.ordinal)
        .limit(limit)
    )
    if types:
        query = query.where(e.type.in_(list(types)))
    found: list[tuple[int, datetime, EventRow]] = []
    for row in connection.execute(query):
        found.append((int(row[0]), _utc(row[1]), EventRow(*row[2:])))
    return found


def last_id(connection: Connection) -> int:
    """The newest event id given out (0 before the first)."""
    value = connection.execute(select(event_counter.c.last_id)).scalar()
    return int(value or 0)


def prune(connection: Connection, cutoff: datetime, batch: int, through: int | None) -> int:
    """Delete the events of up to ``batch`` of the oldest groups committed before ``cutoff``
    (and, with ``through``, whose events all have ids up to it); how many events went."""
    query = select(event_commits.c.grp, event_commits.c.first_id, event_commits.c.last_id).where(
        event_commits.c.committed_at < cutoff.astimezone(UTC)
    )
    if through is not None:
        query = query.where(event_commits.c.last_id <= through)
    rows: Sequence[Any] = connection.execute(
        query.order_by(event_commits.c.committed_at, event_commits.c.last_id).limit(batch)
    ).all()
    if not rows:
        return 0
    groups = [row.grp for row in rows]
    connection.execute(delete(events).where(events.c.grp.in_(groups)))
    connection.execute(delete(event_commits).where(event_commits.c.grp.in_(groups)))
    return sum(row.last_id - row.first_id + 1 for row in rows)
