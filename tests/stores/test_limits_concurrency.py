"""Many concurrent Place Bets against one stake limit, from threads of several ledgers and from
several processes on one database: the stakes accepted never pass the limit. On both stores.

Each entry stakes 7.00 against a limit of 100.00 a day: exactly 14 fit (98.00), whatever the
order, so every run must accept exactly 14, and refuse every other with the limit's key."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import ledger
from support import payloads as P

LEDGERS = 4
THREADS_EACH = 4
TRIES = 5  # entries per thread: 80 asked, 14 fit
PROCESSES = 3
PROCESS_TRIES = 10  # entries per process: 30 asked, 14 fit


def _seed(url: str) -> None:
    with ledger.open_ledger(url) as book:
        book.deposit("u1", "EUR", "1000.00", reference="seed")
        book.set_limit("u1", "EUR", "stake", "day", "100.00", by="user")


def _entry(uid: int) -> dict[str, Any]:
    return P.place(P.entry(uid, "u1", amount=Decimal("7.00"), rake=Decimal("0")))


def _attempt(book: ledger.Ledger, uid: int) -> str:
    try:
        book.place_bets(_entry(uid))
    except ledger.LedgerError as error:
        return error.key
    return "placed"


def _accepted_stakes(url: str) -> Decimal:
    with ledger.open_ledger(url) as book:
        [row] = book.balance("u1", "EUR")
        report = book.check()
        assert report.ok, report.problems
        [limit] = book.limits("u1")
        assert limit.used == row.held
        return row.held


def test_threads_of_several_ledgers_on_one_database_never_pass_a_stake_limit(
    store_url: str,
) -> None:
    _seed(store_url)
    books = [ledger.open_ledger(store_url) for _ in range(LEDGERS)]
    barrier = threading.Barrier(LEDGERS * THREADS_EACH)

    def work(index: int) -> list[str]:
        book = books[index % LEDGERS]
        barrier.wait()
        return [_attempt(book, 1 + index * TRIES + n) for n in range(TRIES)]

    try:
        with ThreadPoolExecutor(max_workers=LEDGERS * THREADS_EACH) as pool:
            outcomes = Counter(
                key for keys in pool.map(work, range(LEDGERS * THREADS_EACH)) for key in keys
            )
    finally:
        for book in books:
            book.close()
    assert outcomes == {"placed": 14, "user.stake_limit_reached": 66}
    assert _accepted_stakes(store_url) == Decimal("98.00")


def _process_worker(url: str, index: int, barrier: Any, results: Any) -> None:
    with ledger.open_ledger(url) as book:
        barrier.wait()
        first = 10_000 + index * PROCESS_TRIES
        results.put([_attempt(book, first + n) for n in range(PROCESS_TRIES)])


def test_several_processes_on_one_database_never_pass_a_stake_limit(store_url: str) -> None:
    _seed(store_url)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    queue = context.Queue()
    workers = [
        context.Process(target=_process_worker, args=(store_url, index, barrier, queue))
        for index in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes = Counter(key for _ in workers for key in queue.get(timeout=120))
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert outcomes == {"placed": 14, "user.stake_limit_reached": 16}
    assert _accepted_stakes(store_url) == Decimal("98.00")
