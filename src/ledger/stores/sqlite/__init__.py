"""The SQLite store: the embedded, zero-set-up default.

Durability is not traded for speed: WAL with ``synchronous=FULL`` fsyncs every commit. Writers
take the database lock up front with ``BEGIN IMMEDIATE`` so that two writers never both read and
then collide on upgrade (which SQLite would fail with ``SQLITE_BUSY`` instead of waiting), and a
busy timeout makes a writer wait for the lock rather than fail.

Amounts beyond 64 bits (SQLite's integers) are stored as their exact decimal text (see
:mod:`.schema`). So that SQLite's own arithmetic, which overflows into inexact REALs, never
touches money, this module adds balances in Python, which the single writer makes safe: under
``BEGIN IMMEDIATE`` nobody else writes between the read and the write. Sums over many rows go
through ``ledger_sum``, an exact aggregate registered on every connection.

Several processes may write one file (``ledger serve --workers N``). SQLite's own wait for its
write lock is a poll whose sleeps grow to 100 ms, so two busy writers handed the lock back and
forth slowly (two workers served fewer Place Bets than one, with a p99 of 870 ms). Each writing
unit of work therefore first takes an ``flock`` on a companion file (``<db>-writer``), waiting
up to the same busy timeout, and only then ``BEGIN IMMEDIATE``: the kernel wakes the next writer
the moment the last one lets go. SQLite's lock still guards the data; this one only decides who
asks for it next.

The copy of the log into the database (a checkpoint) is not a commit's work: each store's
:class:`Checkpointer` copies it on a thread of its own, at most once every
:data:`CHECKPOINT_INTERVAL` seconds while writes come in, and the next writer's commit copies
the few pages written meanwhile so that the log starts over. SQLite's automatic checkpoint, by
default in a commit every 1,000 pages, stays on only as a backstop (:data:`AUTOCHECKPOINT_PAGES`).
"""

from __future__ import annotations

from .bulk import MULTI_ROW
from .checkpointer import AUTOCHECKPOINT_PAGES, CHECKPOINT_INTERVAL, Checkpointer
from .dialect import SqliteDialect
from .exact_sum import ExactSum
from .store import SORTER_THREADS, SqliteStore
from .writer_lock import WriterLock

__all__ = [
    "AUTOCHECKPOINT_PAGES",
    "CHECKPOINT_INTERVAL",
    "MULTI_ROW",
    "SORTER_THREADS",
    "Checkpointer",
    "ExactSum",
    "SqliteDialect",
    "SqliteStore",
    "WriterLock",
]
