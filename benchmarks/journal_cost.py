"""What the delivery journal costs: HTTP Place Bet throughput with it on and off.

    python benchmarks/journal_cost.py [--store sqlite|postgres] [--rounds 3] [--seconds 5]
    python benchmarks/journal_cost.py --embedded [--rounds 5] [--bets 20000]

HTTP (the default): the load of ``run.py`` (a), wrk, 64 connections, one new bet per request,
durable; the journal off is ``LEDGER_DELIVERY_JOURNAL=off``, a switch that exists only for this
measurement. ``--embedded``: the same Place Bets submitted straight to the library's group
commit, with and without a delivery record on each: the journal's own cost, without the HTTP
stack's noise. Rounds alternate journal on and off, each on a fresh database, so that a drift
in the shared machine's load hits both alike; the medians are compared. Target: at most 10%
slower with the journal on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accounting  # the benchmark suite's helpers, beside this file
import databases
import servers

PLACE = "create:fantasy_team"
WINDOW = 1000  # Place Bets in flight at once in an embedded round


def one_round(url: str, journal: str, seconds: int, cpu_rates: list[float]) -> float:
    os.environ["LEDGER_DELIVERY_JOURNAL"] = journal  # inherited by the server process
    port = servers.free_port()
    with servers.ledger_server(url, port) as server:
        servers.fund(port, [f"u{n}" for n in range(servers.USERS)])
        servers.wrk(port, "/bets", servers.USERS, 2)  # warm-up
        before = accounting.tree_cpu_seconds(server.pid)[0]
        result = servers.wrk(port, "/bets", servers.USERS, seconds)
        used = accounting.tree_cpu_seconds(server.pid)[0] - before
    if result["non_2xx"] or result["socket_errors"]:
        raise RuntimeError(f"journal {journal}: {result}")
    # The server's CPU per request: what the journal adds, far steadier than req/s when other
    # work shares the machine (a server starved of CPU answers fewer requests, not dearer ones).
    cpu_rates.append(float(result["requests"]) / used)
    return float(result["rps"])


def embedded_round(
    directory: Path, name: str, journal: bool, bets: int, cpu_rates: list[float]
) -> float:
    import ledger
    from ledger.deliveries import Delivery

    with ledger.open_ledger(f"sqlite:///{directory / name}.db") as book:
        for user in range(servers.USERS):
            book.deposit(f"u{user}", "EUR", "100000000.00", f"fund-u{user}")
        bodies = [servers.place_bet_body(uid) for uid in range(1, bets + 1)]
        started, cpu = time.perf_counter(), time.process_time()
        futures = []
        for uid, body in enumerate(bodies, start=1):
            delivery = None
            if journal:  # made per request, as the HTTP layer does: part of the cost
                arrived = datetime.now(UTC), time.perf_counter()
                delivery = Delivery(*arrived, f"rq-{uid}", PLACE, "/bets", "bench", "bench", "::1")
            futures.append(book.submit_place_bets(body, delivery=delivery))
            if len(futures) == WINDOW:  # the writer's queue is bounded
                for future in futures:
                    future.result()
                futures.clear()
        for future in futures:
            future.result()
        # CPU seconds of every thread of this process: far less sensitive than the wall clock
        # to other work on a shared machine (but blind to fsync waits).
        cpu_rates.append(bets / (time.process_time() - cpu))
        return bets / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--embedded", action="store_true", help="the library, no HTTP")
    parser.add_argument("--bets", type=int, default=20_000, help="Place Bets per embedded round")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}  # bets per CPU second of the writer
    with tempfile.TemporaryDirectory() as scratch:
        for number in range(args.rounds):
            for journal in ("on", "off") if number % 2 == 0 else ("off", "on"):
                name = f"journal-{journal}-{number}"
                if args.embedded:
                    rate = embedded_round(
                        Path(scratch), name, journal == "on", args.bets, cpu[journal]
                    )
                    rates[journal].append(rate)
                    continue
                with contextlib.ExitStack() as stack:
                    url = stack.enter_context(databases.store_url(args.store, Path(scratch), name))
                    rates[journal].append(one_round(url, journal, args.seconds, cpu[journal]))
    on, off = statistics.median(rates["on"]), statistics.median(rates["off"])
    cost = f"{(1 - on / off) * 100:.1f}%"
    summary = {
        "store": "sqlite, embedded" if args.embedded else args.store,
        "rps": rates,
        "median_on": on,
        "median_off": off,
        "cost": cost,
    }
    cpu_on, cpu_off = statistics.median(cpu["on"]), statistics.median(cpu["off"])
    summary["bets_per_cpu_second"] = cpu
    summary["cpu_cost"] = f"{(1 - cpu_on / cpu_off) * 100:.1f}%"
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
