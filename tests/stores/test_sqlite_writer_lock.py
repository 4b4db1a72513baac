"""SQLite's writer lock across processes (ledger.stores.sqlite.WriterLock): a writing unit of
work holds it from before ``BEGIN IMMEDIATE`` to its end, the next writer gets it at once, a
writer kept out past the busy timeout answers 503, and nothing leaks it."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import time
from decimal import Decimal
from pathlib import Path

import pytest

import ledger
from ledger.errors import StoreBusy
from ledger.stores.sqlite import SqliteStore, WriterLock


def _hold(path: str, seconds: float, ready: object) -> None:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    ready.set()  # type: ignore[attr-defined]
    time.sleep(seconds)
    os.close(descriptor)


def test_a_writer_waits_for_another_process_holding_the_lock_and_starts_when_it_lets_go(
    tmp_path: Path,
) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/ledger.db")
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold, args=(f"{tmp_path}/ledger.db-writer", 1.0, ready))
    holder.start()
    try:
        assert ready.wait(30)
        started = time.monotonic()
        with store.unit_of_work() as uow:
            waited = time.monotonic() - started
            uow.commit()
    finally:
        holder.join()
        store.close()
    assert waited >= 0.5  # it did wait for the other process


def test_a_writer_kept_out_past_the_busy_timeout_is_told_to_come_back_later_and_leaks_nothing(
    tmp_path: Path,
) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/ledger.db", busy_timeout=0.3)
    outsider = WriterLock(tmp_path / "ledger.db-writer", 1.0).acquire()
    try:
        with pytest.raises(StoreBusy), store.unit_of_work():
            pass
    finally:
        os.close(outsider)
    try:
        # The writer that gave up left its wait behind; it lets go of the lock once it has it,
        # so the next writer is not kept out.
        with store.unit_of_work() as uow:
            uow.commit()
    finally:
        store.close()


def test_the_lock_is_let_go_when_a_unit_of_work_ends_committed_or_failed(tmp_path: Path) -> None:
    book = ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    lock = WriterLock(tmp_path / "ledger.db-writer", 0.2)
    try:
        book.deposit("u1", "EUR", "10.00", "d1")
        os.close(lock.acquire())  # free after a commit
        with pytest.raises(ledger.LedgerError):
            book.withdraw("u1", "EUR", "99.00", "w1")  # refused: insufficient funds
        os.close(lock.acquire())  # and after a refusal
        [balance] = book.balance("u1")
        assert balance.available == Decimal("10.00")
    finally:
        book.close()


def test_a_reader_never_takes_the_writer_lock(tmp_path: Path) -> None:
    book = ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db")
    book.deposit("u1", "EUR", "10.00", "d1")
    held = WriterLock(tmp_path / "ledger.db-writer", 0.2).acquire()
    try:
        [balance] = book.balance("u1")
        assert balance.available == Decimal("10.00")
    finally:
        os.close(held)
        book.close()
