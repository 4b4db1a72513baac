"""What the delivery journal costs: HTTP Place Bet throughput with it on and off.

    python benchmarks/journal_cost.py [--store sqlite|postgres] [--rounds 3] [--seconds 5]

The load of ``run.py`` (a): wrk, 64 connections, one new bet per request, durable. Rounds
alternate journal on and off (``LEDGER_DELIVERY_JOURNAL=off``, a switch that exists only for
this measurement), each on a fresh database, so that a drift in the shared machine's load hits
both alike; the medians are compared. Target: at most 10% slower with the journal on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # the benchmark suite's helpers, beside this file


def one_round(url: str, journal: str, seconds: int) -> float:
    os.environ["LEDGER_DELIVERY_JOURNAL"] = journal  # inherited by the server process
    port = run.free_port()
    with run.ledger_server(url, port):
        run.fund(port, [f"u{n}" for n in range(run.USERS)])
        run.wrk(port, "/bets", run.USERS, 2)  # warm-up
        result = run.wrk(port, "/bets", run.USERS, seconds)
    if result["non_2xx"] or result["socket_errors"]:
        raise RuntimeError(f"journal {journal}: {result}")
    return float(result["rps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as scratch:
        for number in range(args.rounds):
            for journal in ("on", "off") if number % 2 == 0 else ("off", "on"):
                name = f"journal-{journal}-{number}"
                with contextlib.ExitStack() as stack:
                    url = stack.enter_context(run.store_url(args.store, Path(scratch), name))
                    rates[journal].append(one_round(url, journal, args.seconds))
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    cost = f"{(1 - on / off) * 100:.1f}%"
    summary = {"store": args.store, "rps": rates, "median_on": on, "median_off": off, "cost": cost}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
