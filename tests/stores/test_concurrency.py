"""Concurrent deliveries apply once: threads on every store, and processes on Postgres.

Every worker waits on a barrier so that all of them hit the database at the same moment.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import ledger
from support import payloads as P
from support.books import balance

D = Decimal
THREADS = 16


def _together(count: int, work: Callable[[int], object]) -> list[object]:
    """Run ``work(i)`` in ``count`` threads released at once; errors are returned, not raised."""
    barrier = threading.Barrier(count)

    def run(index: int) -> object:
        barrier.wait()
        try:
            return work(index)
        except ledger.LedgerError as error:
            return error

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def _keys(results: list[object]) -> Counter[str]:
    return Counter(r.key for r in results if isinstance(r, ledger.LedgerError))


def test_same_bet_delivered_by_16_threads_is_held_once(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="seed")
    results = _together(THREADS, lambda _: book.place_bets(P.place(P.entry(1))))
    assert _keys(results) == Counter()
    placed = [r for r in results if isinstance(r, ledger.PlacedBets) and r.placed == [1]]
    assert len(placed) == 1
    # Every delivery answers the secrets of the one placement.
    assert {r.secrets["ledger_ref"] for r in results if isinstance(r, ledger.PlacedBets)} == {
        placed[0].secrets["ledger_ref"]
    }
    assert balance(book, "u1") == (D("89.00"), D("11.00"))
    report = book.check()
    assert report.ok, report.problems
    assert report.bets == 1


def test_16_threads_placing_different_bets_never_overdraw(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "55.00", reference="seed")  # covers 5 entries of 11.00
    results = _together(THREADS, lambda i: book.place_bets(P.place(P.entry(100 + i))))
    placed = [r for r in results if isinstance(r, ledger.PlacedBets)]
    assert len(placed) == 5
    assert _keys(results) == Counter({"user.insufficient_funds": THREADS - 5})
    assert balance(book, "u1") == (D("0.00"), D("55.00"))
    report = book.check()
    assert report.ok, report.problems
    assert report.bets == 5


def test_same_settle_delivered_by_16_threads_pays_once(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="seed")
    book.place_bets(P.place(P.entry(1)))
    results = _together(THREADS, lambda _: book.settle(P.settle(7, (1, "30.00"))))
    assert _keys(results) == Counter()
    closed = [r for r in results if isinstance(r, ledger.ClosedBets) and r.closed]
    assert len(closed) == 1
    assert balance(book, "u1") == (D("119.00"), D("0.00"))
    assert book.check().ok


def test_same_refund_delivered_by_16_threads_refunds_once(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="seed")
    book.place_bets(P.place(P.entry(1), P.entry(2)))
    results = _together(THREADS, lambda _: book.refund(P.refund(7, 1, 2)))
    assert _keys(results) == Counter()
    assert balance(book, "u1") == (D("100.00"), D("0.00"))
    assert book.check().ok


def test_same_withdrawal_sent_by_16_threads_pays_out_once(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="seed")
    results = _together(THREADS, lambda _: book.withdraw("u1", "EUR", "100.00", reference="w"))
    assert _keys(results) == Counter()
    assert sum(1 for r in results if isinstance(r, ledger.Movement) and r.applied) == 1
    assert balance(book, "u1") == (D("0.00"), D("0.00"))
    assert book.check().ok


def test_deposits_and_bets_of_many_users_at_once_lose_no_update(book: ledger.Ledger) -> None:
    def work(i: int) -> object:
        user = f"u{i % 4}"
        book.deposit(user, "EUR", "20.00", reference=f"d{i}")
        return book.place_bets(P.place(P.entry(200 + i, user=user)))

    results = _together(THREADS, work)
    assert _keys(results) == Counter()
    for n in range(4):
        assert balance(book, f"u{n}") == (D("36.00"), D("44.00"))
    assert book.check().ok


# --- two processes on one Postgres ---------------------------------------------------------------


def _process_worker(url: str, index: int, barrier: Any, results: Any) -> None:
    """One process, its own Ledger: the same bet as the other process, then bets of its own."""
    outcome: list[str] = []
    with ledger.open_ledger(url) as book:
        barrier.wait()
        for uid in [1, *(1000 * (index + 1) + k for k in range(8))]:
            try:
                answer = book.place_bets(P.place(P.entry(uid)))
                outcome.append("placed" if answer.placed else "unchanged")
            except ledger.LedgerError as error:
                outcome.append(error.key)
        barrier.wait()
        try:
            settled = book.settle(P.settle(7, (1, "5.00")))
            outcome.append("settled" if settled.closed else "unchanged")
        except ledger.LedgerError as error:
            outcome.append(error.key)
    results.put((index, outcome))


def test_two_processes_on_postgres_hold_each_bet_once_and_never_overdraw(
    postgres_url: str,
) -> None:
    with ledger.open_ledger(postgres_url, migrate=True) as book:
        book.deposit("u1", "EUR", "110.00", reference="seed")  # covers 10 entries of 11.00
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    queue = context.Queue()
    workers = [
        context.Process(target=_process_worker, args=(postgres_url, index, barrier, queue))
        for index in range(2)
    ]
    for worker in workers:
        worker.start()
    outcomes = dict(queue.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    firsts = sorted(outcomes[i][0] for i in range(2))
    assert firsts == ["placed", "unchanged"]
    settles = sorted(outcomes[i][-1] for i in range(2))
    assert settles == ["settled", "unchanged"]
    everything = Counter(o for i in range(2) for o in outcomes[i][1:-1])
    assert set(everything) <= {"placed", "user.insufficient_funds"}
    assert everything["placed"] == 9  # 10 entries affordable, bet 1 took one
    with ledger.open_ledger(postgres_url) as book:
        assert balance(book, "u1") == (D("5.00"), D("99.00"))
        report = book.check()
        assert report.ok, report.problems
        assert report.bets == 10
