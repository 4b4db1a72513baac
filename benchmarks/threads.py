"""CPU, run-queue wait and voluntary switches per request of each thread of the server under (a).

    python benchmarks/threads.py [--seconds 10] [--db URL]

Starts ``ledger serve`` as ``run.py`` does (SQLite in a temporary directory unless ``--db``;
``LEDGER_WRITER_PROCESS`` and the rest from the environment), loads it with wrk (one new Place
Bet per request, 64 connections), and reads ``/proc/<pid>/task/*/{stat,status,schedstat}`` of the
server and of every process under it (its writer process) before and after the run. Prints, per
thread, microseconds of CPU a request (and its user share), of waiting in the run queue, and
voluntary context switches a request: where a request's CPU goes, and whether a thread waits for
a core or for a lock (the GIL).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import accounting
import servers

Sample = tuple[str, int, int, int, int]  # name, CPU ticks, user ticks, switches, queued ns


def descendants(pid: int) -> set[int]:
    """``pid`` and every process under it (its writer process, workers)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = accounting.stat_ticks(stat)[0]
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return accounting.under(pid, parents)


def sample(pids: set[int]) -> dict[tuple[int, int], Sample]:
    threads: dict[tuple[int, int], Sample] = {}
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
                status = (task / "status").read_text()
                waited = int((task / "schedstat").read_text().split()[1])
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            switches = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            user, system = int(fields[11]), int(fields[12])
            threads[(pid, int(task.name))] = (name, user + system, user, switches, waited)
    return threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="database URL (default: a new SQLite file)")
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    tick = os.sysconf("SC_CLK_TCK")
    with tempfile.TemporaryDirectory(prefix="ledger-threads-") as tmp:
        db = args.db or f"sqlite:///{Path(tmp) / 'threads.db'}"
        port = servers.free_port()
        with servers.ledger_server(db, port) as process:
            servers.fund(port, [f"u{n}" for n in range(servers.USERS)])
            servers.wrk(port, "/bets", servers.USERS, 2)  # warm-up
            pids = descendants(process.pid)
            before = sample(pids)
            figures = servers.wrk(port, "/bets", servers.USERS, args.seconds, pid=process.pid)
            after = sample(pids)
    requests = figures["requests"]
    print(
        f"{figures['rps']:,.0f} req/s, p99 {figures['p99_us'] / 1000:.1f} ms, "
        f"server CPU {figures['server_cpu_us_per_request']:.0f} us/request"
    )
    print("   pid     tid  thread           CPU us (user)  run-queue us  switches   (a request)")
    for key in sorted(after):
        if key not in before:
            continue
        name, cpu, user, switches, waited = after[key]
        _, cpu_was, user_was, switches_was, waited_was = before[key]
        cpu_us = (cpu - cpu_was) / tick * 1e6 / requests
        if cpu_us < 1:
            continue
        user_us = (user - user_was) / tick * 1e6 / requests
        queued_us = (waited - waited_was) / 1e3 / requests
        print(
            f"{key[0]:>6} {key[1]:>7}  {name:<15} {cpu_us:7.1f} ({user_us:5.1f})"
            f"  {queued_us:12.1f}  {(switches - switches_was) / requests:8.2f}"
        )


if __name__ == "__main__":
    main()
