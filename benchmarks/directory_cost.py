"""What recording tournaments and users costs Place Bet: the directory on, then off, alternating.

    python benchmarks/directory_cost.py [--bets 10000] [--rounds 5] [--json PATH]

Each run opens a fresh SQLite file (group commit, as the server runs), funds 500 users, submits
``--bets`` one-entry Place Bets across 50 tournaments at once and waits for all of them. "Off"
stubs the directory's two hooks (building the records from the payload, and the upsert in the
writer) in this same process, so both variants share the machine's state. Prints the median
bets/s and process CPU per 1000 bets of each; CPU time is the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from decimal import Decimal
from typing import Any

import ledger
import ledger.commands.places as writer
import ledger.service.writes as service
from ledger.directory import NOTHING_SEEN

USERS = 500
POOLS = 50


def body(uid: int) -> dict[str, Any]:
    user, pool = f"u{uid % USERS}", uid % POOLS
    return {
        "bets": [
            {
                "user": {"uid": user, "name": f"name-{user}", "client": "acme"},
                "pool": {"uid": pool, "name": f"Tournament {pool}", "currency": "EUR"},
                "bet": {"uid": uid, "amount": Decimal("10.00"), "currency": "EUR"},
            }
        ]
    }


def run(bets: int, *, directory: bool) -> tuple[float, float]:
    # The writer's hook as the Place Bet command calls it (its module's own name for it).
    real_seen, real_record = service._seen, getattr(writer, "record_seen")  # noqa: B009
    if not directory:
        service._seen = lambda pools, users: NOTHING_SEEN
        setattr(writer, "record_seen", lambda uow, seen: None)  # noqa: B010
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.db"
            with ledger.open_ledger(url, migrate=True, max_queue=bets + 1) as book:
                for n in range(USERS):
                    book.deposit(f"u{n}", "EUR", "1000000", f"fund-{n}")
                bodies = [body(uid) for uid in range(bets)]
                started, cpu = time.perf_counter(), time.process_time()
                for future in [book.submit_place_bets(item) for item in bodies]:
                    future.result()
                wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        service._seen = real_seen
        setattr(writer, "record_seen", real_record)  # noqa: B010
    return bets / wall, cpu / bets * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bets", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        for name in ("off", "on"):
            found[name].append(run(args.bets, directory=name == "on"))
    summary = {
        name: {
            "bets_per_s": statistics.median(rate for rate, _ in runs),
            "cpu_ms_per_1000_bets": statistics.median(cpu for _, cpu in runs),
            "runs": [round(rate) for rate, _ in runs],
        }
        for name, runs in found.items()
    }
    print(f"{'directory':<10}{'bets/s':>10}{'CPU ms / 1000 bets':>22}")
    for name, row in summary.items():
        print(f"{name:<10}{row['bets_per_s']:>10.0f}{row['cpu_ms_per_1000_bets']:>22.1f}")
    if args.json_path:
        with open(args.json_path, "w") as out:
            json.dump(summary, out, indent=2)


if __name__ == "__main__":
    main()
