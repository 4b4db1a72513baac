"""Where a SQLite transaction keeps its temporary data: in memory for a write, on disk for a bulk
write (a huge close's staging tables and sorts) and for a read (the operator's large sorts).

SQLite fixes where a transaction's statement journals go when it begins, and refuses to move
temporary storage inside a transaction that has used it: the store says it before ``BEGIN``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text

import ledger
from ledger.commands import SET_BASED_FROM
from ledger.stores.sqlite import SqliteStore
from support import payloads as P

MEMORY, DEFAULT = 2, 0  # PRAGMA temp_store's answers


def temp_store(store: SqliteStore, *, write: bool, bulk: bool) -> int:
    with store.unit_of_work(write=write, bulk=bulk) as uow:
        found = uow._conn.execute(text("PRAGMA temp_store")).scalar()
        assert isinstance(found, int)
        return found


def test_a_write_keeps_temporary_data_in_memory_a_bulk_write_and_a_read_on_disk(
    tmp_path: Path,
) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        # In turns on the pool's connections: each unit says what it needs before it begins.
        for _ in range(2):
            assert temp_store(store, write=True, bulk=False) == MEMORY
            assert temp_store(store, write=True, bulk=True) == DEFAULT
            assert temp_store(store, write=False, bulk=False) == DEFAULT
            assert temp_store(store, write=True, bulk=False) == MEMORY
    finally:
        store.close()


class Recording:
    """A store that records the ``bulk`` of each write unit of work it opens."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.url = inner.url
        self.bulk: list[bool] = []

    def unit_of_work(self, *, write: bool = True, bulk: bool = False) -> Any:
        if write:
            self.bulk.append(bulk)
        return self._inner.unit_of_work(write=write, bulk=bulk)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_only_a_refund_or_settle_that_may_close_set_based_runs_in_a_bulk_unit(
    tmp_path: Path,
) -> None:
    opened = ledger.open_ledger(f"sqlite:///{tmp_path / 'l.db'}")
    store = Recording(opened.store)
    book = ledger.Ledger(store)
    try:
        book.deposit("u1", "EUR", "100000.00", "fund")
        items = SET_BASED_FROM
        book.place_bets(P.place(*(P.entry(uid) for uid in range(1, items + 11))))
        book.settle(P.settle(7, *((uid, "0.00") for uid in range(1, items + 1))))
        book.refund(P.refund(7, *range(items + 1, items + 11)))  # ten: the domain's path
        assert store.bulk == [False, False, True, False]
        # The huge settle's staging worked on disk after the memory of the units before it.
        settled, refunded = book.bet(items), book.bet(items + 1)
        assert settled is not None
        assert settled.state == "settled"
        assert refunded is not None
        assert refunded.state == "refunded"
    finally:
        book.close()
        opened.close()
