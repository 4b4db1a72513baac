"""Reconciliation of a million bets: build a ledger and the platform's file, time ``reconcile``.

The ledger gets ``--bets`` bets in pools of 1,000 through the library's own write path (a third
of the pools settled, a third refunded, a third left open); the platform's CSV lists the same
bets with a few injected differences of each kind. The timed part is what ``ledger reconcile
FILE`` does: read the file into the scratch database, stream the books next to it, compare,
and walk every differing row. Building the ledger is not timed.

    .venv/bin/python benchmarks/reconcile.py                      # 1,000,000 bets on SQLite
    .venv/bin/python benchmarks/reconcile.py --bets 20000 --json out.json
    .venv/bin/python benchmarks/reconcile.py --db postgresql://... # an empty, migrated database
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import ledger

POOL = 1000
CHUNK = 50_000
INJECTED = 10  # differences of each kind


def entries(first: int, count: int) -> Iterator[dict[str, Any]]:
    for uid in range(first, first + count):
        pool = uid // POOL
        user = f"u{uid % 100}"
        yield {
            "user": {"client": "bench", "uid": user, "name": user},
            "pool": {
                "client": "bench",
                "game": "fantasy",
                "uid": pool,
                "name": f"Pool {pool}",
                "currency": "EUR",
                "overdraw": "0.00",
                "category": "admin_created",
                "amount": Decimal("2.00"),
            },
            "bet": {
                "uid": uid,
                "uuid": f"{pool}|{uid}",
                "amount": Decimal("2.00"),
                "rake": Decimal("0.20"),
                "currency": "EUR",
            },
        }


def fate(pool: int) -> str:
    return ("settled", "refunded", "placed")[pool % 3]


def closing(pool: int) -> dict[str, Any]:
    bets = [
        {
            "user": {"client": "bench", "uid": f"u{uid % 100}", "name": "x"},
            "bet": {
                "uid": uid,
                "uuid": f"{pool}|{uid}",
                "currency": "EUR",
                "secrets": {},
                "payout": "3.00" if uid % 4 == 0 else "0.00",
                "rank": 1,
            },
        }
        for uid in range(pool * POOL, (pool + 1) * POOL)
    ]
    header = {"client": "bench", "game": "fantasy", "gameType": "football", "uid": pool}
    header.update(currency="EUR", overdraw="0.00", category="admin_created")
    header["status"] = "closed" if fate(pool) == "settled" else "cancelled"
    return {"pool": header, "bets": bets}


def build_ledger(url: str, bets: int) -> None:
    with ledger.open_ledger(url, migrate=True) as book:
        for user in range(100):
            book.deposit(f"u{user}", "EUR", str(bets * 3 // 100 + 10), f"fund-{user}")
        for first in range(POOL, POOL + bets, CHUNK):
            book.place_bets({"bets": list(entries(first, min(CHUNK, POOL + bets - first)))})
        pools = range(1, 1 + bets // POOL)
        settled = [pool for pool in pools if fate(pool) == "settled"]
        refunded = [pool for pool in pools if fate(pool) == "refunded"]
        for batch in range(0, len(settled), 50):
            book.settle({"pools": [closing(pool) for pool in settled[batch : batch + 50]]})
        for batch in range(0, len(refunded), 50):
            book.refund({"pools": [closing(pool) for pool in refunded[batch : batch + 50]]})


def write_file(path: Path, bets: int) -> None:
    """The platform's CSV, with INJECTED differences of each kind at known uids."""
    columns = ["uid", "user", "pool", "amount", "rake", "currency", "status", "payout"]
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        for uid in range(POOL, POOL + bets):
            pool = uid // POOL
            state = fate(pool)
            payout = ("3.00" if uid % 4 == 0 else "0.00") if state == "settled" else ""
            amount = "2.00"
            offset = uid - POOL
            if offset < INJECTED:
                continue  # missing on the platform
            if offset < 2 * INJECTED:
                amount = "2.01"
            elif offset < 3 * INJECTED and state != "placed":
                state = "placed"
            writer.writerow([uid, f"u{uid % 100}", pool, amount, "0.20", "EUR", state, payout])
        for uid in range(10**12, 10**12 + INJECTED):  # missing in the wallet
            writer.writerow([uid, "u1", 1, "2.00", "0.20", "EUR", "placed", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bets", type=int, default=1_000_000)
    parser.add_argument("--db", help="a migrated, empty database (default: a SQLite file)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as directory:
        url = args.db or f"sqlite:///{directory}/ledger.db"
        started = time.perf_counter()
        build_ledger(url, args.bets)
        built = time.perf_counter() - started
        path = Path(directory) / "platform.csv"
        write_file(path, args.bets)
        with ledger.open_ledger(url, group_commit=False) as book:
            started, cpu = time.perf_counter(), time.process_time()
            with book.reconcile(path) as found:
                listed = sum(1 for _ in found.differences())
                summary = found.summary()
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    results = {
        "machine": {"python": platform.python_version(), "system": platform.platform()},
        "store": url.split(":", 1)[0],
        "bets": args.bets,
        "build_s": round(built, 1),
        "reconcile_s": round(elapsed, 2),
        # CPU seconds of this process: the wall time also counts waiting for a shared machine.
        "reconcile_cpu_s": round(cpu, 2),
        "load_average": os.getloadavg()[0],
        "rows_per_s": round((summary["platform_rows"] + summary["wallet_bets"]) / elapsed),
        "differences_listed": listed,
        "counts": summary["counts"],
    }
    print(f"{'store':<10}{'bets':>12}{'build s':>10}{'reconcile s':>13}{'cpu s':>8}{'diffs':>7}")
    print(
        f"{results['store']:<10}{args.bets:>12,}{built:>10.1f}{elapsed:>13.2f}{cpu:>8.2f}"
        f"{listed:>7,}"
    )
    print(json.dumps(summary["counts"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
