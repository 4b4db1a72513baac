"""CPU milliseconds per 1,000 bets of the embedded write path, for before/after comparisons.

    PYTHONPATH=<a checkout's src> .venv/bin/python benchmarks/write_path_cpu.py

Process CPU time rather than wall time: on a shared machine the wall clock swings by a third
between runs, while the CPU a process spends on its own work barely moves. Three figures, on a
fresh SQLite ledger with group commit:

- ``batched_place``: Place Bets of 1,000 entries each (20,000 bets);
- ``single_place``: one-entry Place Bets submitted as raw JSON bytes through the writer's future,
  64 in flight (4,000 requests): what the server does per delivery, without HTTP;
- ``settle``: one Settle of the 20,000 batched bets.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import Future, wait
from typing import Any

USERS = 64


def place_body(uids: Iterable[int]) -> dict[str, Any]:
    return {
        "bets": [
            {
                "user": {"uid": f"u{uid % USERS}"},
                "pool": {"uid": 1},
                "bet": {"uid": uid, "amount": "1.00", "rake": "0.10", "currency": "EUR"},
            }
            for uid in uids
        ]
    }


def measure(directory: str) -> dict[str, float]:
    import ledger

    book = ledger.open_ledger(f"sqlite:///{directory}/bench.db")
    for n in range(USERS):
        book.deposit(f"u{n}", "EUR", "100000000.00", f"fund-{n}")
    result: dict[str, float] = {}
    started = time.process_time()
    for start in range(0, 20_000, 1_000):
        book.place_bets(place_body(range(start, start + 1_000)))
    result["batched_place"] = (time.process_time() - started) * 1000 / 20
    started = time.process_time()
    futures: list[Future[Any]] = []
    for uid in range(100_000, 104_000):
        futures.append(book.submit_place_bets(json.dumps(place_body([uid])).encode()))
        if len(futures) >= 64:
            wait(futures)
            futures = []
    wait(futures)
    result["single_place"] = (time.process_time() - started) * 1000 / 4
    participants = [
        {"user": {"uid": f"u{uid % USERS}"}, "bet": {"uid": uid, "payout": "0.50"}}
        for uid in range(20_000)
    ]
    body = json.dumps({"pools": [{"pool": {"uid": 1}, "bets": participants}]}).encode()
    started = time.process_time()
    book.settle(body)
    result["settle"] = (time.process_time() - started) * 1000 / 20
    book.close()
    return result


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        figures = measure(directory)
    json.dump({name: round(value, 1) for name, value in figures.items()}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
