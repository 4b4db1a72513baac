"""Place Bet throughput across topologies: 1 and 2 server replicas on one Postgres primary, with
its standby asynchronous (commits do not wait for it) and synchronous (every commit waits until
the standby has the WAL).

    python benchmarks/topology.py [--seconds 5] [--json PATH]
    python benchmarks/topology.py --recipe [--seconds 5] [--json PATH]

With ``--recipe``, the documented production recipe instead (``tests/support/topology.py``: three
Patroni nodes running Debian's Postgres 15 in synchronous mode, two replicas, HAProxy), then the
same with pgbouncer in transaction mode: Place Bet sent to one replica directly, through HAProxy
to two replicas and to one (the other stopped), each as a ratio to the first figure of the run
without pgbouncer (one replica, direct).

One primary and one streaming standby on 127.0.0.1, built like the failover test's
(``tests/support/replication.py``, fsync on); wrk drives HTTP Place Bet (one new bet per request,
64 connections in total, split between the replicas), as benchmark (a) of ``run.py`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from accounting import machine  # noqa: E402
from servers import (  # noqa: E402
    CLIENT,
    CONNECTIONS,
    OPERATOR,
    SECRET,
    USERS,
    free_port,
    fund,
    ledger_server,
    wrk,
)

from support.replication import ReplicatedPostgres  # noqa: E402
from support.topology import Topology  # noqa: E402


def load(ports: list[int], seconds: int) -> dict[str, Any]:
    """wrk on every replica at once, the connections split between them; the summed rate."""
    results: list[dict[str, Any]] = [{} for _ in ports]

    def drive(index: int, port: int) -> None:
        results[index] = wrk(port, "/bets", USERS, seconds, CONNECTIONS // len(ports))

    threads = [threading.Thread(target=drive, args=item) for item in enumerate(ports)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if any(result["non_2xx"] or result["socket_errors"] for result in results):
        raise RuntimeError(f"errors under load: {results}")
    return {
        "rps": sum(result["rps"] for result in results),
        "p99_ms": max(result["p99_us"] for result in results) / 1000,
        "p50_ms": max(result["p50_us"] for result in results) / 1000,
    }


def scenario(cluster: ReplicatedPostgres, replicas: int, seconds: int) -> dict[str, Any]:
    ports = [free_port() for _ in range(replicas)]
    with contextlib.ExitStack() as stack:
        for port in ports:
            stack.enter_context(ledger_server(cluster.multi_host_url(), port))
        fund(ports[0], [f"u{n}" for n in range(USERS)])
        load(ports, 2)  # warm-up
        return load(ports, seconds)


def recipe(seconds: int, pgbouncer: bool) -> dict[str, dict[str, Any]]:
    """The recipe's figures: one replica direct, two and one through HAProxy."""
    env = {
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
        "LEDGER_LOG_LEVEL": "INFO",
    }
    with tempfile.TemporaryDirectory() as scratch:
        topology = Topology(Path(scratch), pgbouncer=pgbouncer, env=env)
        try:
            topology.start()
            haproxy = topology.wallet_port
            fund(haproxy, [f"u{n}" for n in range(USERS)])
            runs: dict[str, dict[str, Any]] = {}
            load([haproxy], 2)  # warm-up
            runs["1 replica, direct"] = load([topology.replicas[0].port], seconds)
            runs["2 replicas, HAProxy"] = load([haproxy], seconds)
            log = topology.root / "haproxy.log"
            downs = log.read_text().count("ledger/app2 is DOWN")
            topology.replicas[1].stop()
            marked = lambda: log.read_text().count("ledger/app2 is DOWN") > downs  # noqa: E731
            topology.wait(marked, 30, "HAProxy marking the stopped replica down")
            runs["1 replica, HAProxy"] = load([haproxy], seconds)
            return runs
        finally:
            topology.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--recipe", action="store_true")
    args = parser.parse_args()
    if args.recipe:
        main_recipe(args.seconds, args.json)
        return
    cluster = ReplicatedPostgres(synchronous=True, fsync=True)
    results: dict[str, Any] = {"machine": machine(), "seconds": args.seconds, "runs": {}}
    try:
        cluster.start()
        subprocess.run(
            [sys.executable, "-m", "ledger", "db", "upgrade", "--db", cluster.multi_host_url()],
            check=True,
        )
        for synchronous in (False, True):
            cluster.wait_for_standby(synchronous)
            for replicas in (1, 2):
                name = f"{replicas} replica(s), standby {'sync' if synchronous else 'async'}"
                print(f"{name} ...", flush=True)
                results["runs"][name] = scenario(cluster, replicas, args.seconds)
    finally:
        cluster.close()
    print(f"\n{'topology':<34} {'Place Bet/s':>12} {'p50 ms':>8} {'p99 ms':>8}")
    for name, run in results["runs"].items():
        print(f"{name:<34} {run['rps']:>12,.0f} {run['p50_ms']:>8.1f} {run['p99_ms']:>8.1f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def main_recipe(seconds: int, json_path: Path | None) -> None:
    results: dict[str, Any] = {"machine": machine(), "seconds": seconds, "runs": {}}
    for pgbouncer in (False, True):
        for name, run in recipe(seconds, pgbouncer).items():
            results["runs"][name + (", pgbouncer" if pgbouncer else "")] = run
    base = results["runs"]["1 replica, direct"]["rps"]
    print(f"\n{'recipe (synchronous standby)':<34} {'Place Bet/s':>12} {'ratio':>6} {'p99 ms':>8}")
    for name, run in results["runs"].items():
        run["ratio"] = run["rps"] / base
        print(f"{name:<34} {run['rps']:>12,.0f} {run['ratio']:>6.2f} {run['p99_ms']:>8.1f}")
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
