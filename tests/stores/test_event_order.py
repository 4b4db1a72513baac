"""Event ids follow commit order as readers see it, with writers in several processes (Postgres).

A sequence would not do it: a transaction that drew a lower id can commit after one that drew a
higher, and a reader that had read past the higher one would never see the lower. Here four
processes write at once (Place Bets through group commit, deposits, settles and refunds on
direct writers of their own) while this process polls the feed. Ids are contiguous (no gaps),
so "never meets an id below one it saw" is: every page read starts right after the previous
one and has no hole, and at the end the reader has met every event, once.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ledger
from support import payloads as P
from support.books import execute_raw

WORKERS = 4
ROUNDS = 25
PER_ROUND = 7  # a deposit, three entries placed, two settled, one refunded


def _writer(url: str, worker: int, barrier: Any, done: Any) -> None:
    with ledger.open_ledger(url) as book:

        def one_round(n: int) -> None:
            user = f"w{worker}u{n}"
            pool = 1000 * (worker + 1) + n
            first = 100_000 * (worker + 1) + 10 * n
            book.deposit(user, "EUR", "100.00", f"dep-{worker}-{n}")
            book.place_bets(P.place(*(P.entry(first + k, user=user, pool=pool) for k in range(3))))
            book.settle(P.settle(pool, (first, "12.50", user), (first + 1, "0", user)))
            book.refund(P.refund(pool, (first + 2, user)))

        barrier.wait()
        with ThreadPoolExecutor(8) as threads:
            list(threads.map(one_round, range(ROUNDS)))
    done.put(worker)


def test_a_reader_polling_during_concurrent_commits_never_meets_an_id_below_one_it_saw(
    postgres_url: str,
) -> None:
    ledger.open_ledger(postgres_url, migrate=True).close()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS + 1)
    done = context.Queue()
    workers = [
        context.Process(target=_writer, args=(postgres_url, index, barrier, done))
        for index in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    seen: list[int] = []
    pages_with_events = 0
    finished: set[int] = set()
    with ledger.open_ledger(postgres_url) as book:
        barrier.wait(timeout=120)
        after = 0
        while True:
            all_done = len(finished) == WORKERS
            page = book.events(after, limit=1000)
            ids = [event.id for event in page.events]
            # No hole: an id missing here could only commit later, below what was seen.
            assert ids == list(range(after + 1, after + 1 + len(ids)))
            seen += ids
            pages_with_events += bool(ids)
            after = page.next
            if all_done and not ids:
                break
            while not done.empty():
                finished.add(done.get())
            if not all(worker.is_alive() for worker in workers) and len(finished) < WORKERS:
                assert all(worker.exitcode in (0, None) for worker in workers)
            time.sleep(0.01)  # the machine is shared: poll, do not spin
        final = _all(book)
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    total = WORKERS * ROUNDS * PER_ROUND
    assert seen == list(range(1, total + 1))
    assert [event.id for event in final] == seen
    # Every event once: each bet's placement and closing, each deposit.
    keys = [(event.type, event.bet, event.reference) for event in final]
    assert len(set(keys)) == total
    # The reader did read while the writers wrote (not only once they were done).
    assert pages_with_events > 1


def _all(book: ledger.Ledger) -> list[Any]:
    found: list[Any] = []
    after = 0
    while page := book.events(after, limit=1000).events:
        found += page
        after = page[-1].id
    return found


def test_the_first_writer_of_a_schema_without_the_counters_row_creates_it(
    book: ledger.Ledger,
) -> None:
    execute_raw(book, "DELETE FROM event_counter")  # as a schema made from the metadata
    book.deposit("u1", "EUR", "100.00", "seed")
    book.place_bets(P.place(P.entry(1), P.entry(2)))
    book.place_bets(P.place(P.entry(3)))
    page = book.events(after=0, limit=100)
    assert [event.id for event in page.events] == list(range(1, len(page.events) + 1))
    assert [event.bet for event in page.events if event.bet is not None] == [1, 2, 3]
