"""Reconciliation: the platform's record of its bets compared with the books, set-based.

The platform's file (CSV, TSV, a JSON array or JSON lines, told apart by their first bytes) is
read with sqlite-utils (``rows_from_file``) into a scratch SQLite database on disk (a
sqlite-utils ``Database``), whichever store the ledger uses;
the ledger's bets are streamed next to it from one read-only unit of work; one join then
classifies every bet. Both sides stay on disk, so a file of millions of bets needs memory for one
batch at a time (a JSON *array* is the exception: it is one document and is parsed whole, so
large exports should be CSV or JSON lines).

Streaming the ledger's bets into the scratch database is one way for both stores, bounded in
memory (batches of :data:`ledger.stores.queries.RECORD_BATCH`; a server-side cursor on Postgres).
On SQLite, attaching the ledger's file instead would save the copy, about a sixth of the CPU
time profiled on 100,000 bets, but would compare amounts of two representations (the ledger
keeps wide values as text) and read a live database behind its store's back; not worth it
within the budget (``benchmarks/reconcile.py``: a million bets).

Amounts are exact: the file's amounts are decimal strings (or JSON numbers, read as
``Decimal``), converted to the currency's minor units and compared as canonical integer text.
An amount finer than its currency's minor unit can equal nothing the ledger holds and is kept
as ``~<text>``, so it is reported as a mismatch rather than refusing the file.

Nothing in the books is changed: the ledger is only read.

Its parts: reading the file (:mod:`.parsing`), the comparison (:mod:`.matching`), the report
(:mod:`.report`).
"""

from __future__ import annotations

from .matching import BetReader, reconcile
from .parsing import STATUSES, Source, UnreadableFile
from .report import COUNTS, CSV_COLUMNS, Reconciliation

__all__ = [
    "COUNTS",
    "CSV_COLUMNS",
    "STATUSES",
    "BetReader",
    "Reconciliation",
    "Source",
    "UnreadableFile",
    "reconcile",
]
