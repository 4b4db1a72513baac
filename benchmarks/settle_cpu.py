"""CPU seconds of one embedded Settle (or Refund Tournament) of N participants, for before/after.

    .venv/bin/python benchmarks/settle_cpu.py --participants 100000 --store sqlite
    .venv/bin/python benchmarks/settle_cpu.py --participants 100000 --store postgres --refund
    .venv/bin/python benchmarks/settle_cpu.py --participants 1000 --set-based-from 0

Process CPU time (this process: parsing, deciding, the driver) and, on Postgres, the server's
own CPU for the request (``pg_stat_statements`` is not needed: the backend's ``/proc`` times),
so that a shared machine's load does not swing the figure. ``--profile FILE`` writes a cProfile
of the settle alone. The entries are placed with tickets (nobody needs funding), one user each,
one payout in ten positive: the same book as ``run.py``'s (c).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from databases import store_url
from run import place_entries, settle_body


def refund_body(participants: int, first_uid: int) -> bytes:
    parts = [
        f'{{"user":{{"uid":"p{n}"}},"bet":{{"uid":{first_uid + n},"amount":"1.00",'
        f'"rake":"0.10","currency":"EUR","secrets":{{}}}}}}'
        for n in range(participants)
    ]
    return f'{{"pools":[{{"pool":{{"uid":9}},"bets":[{",".join(parts)}]}}]}}'.encode()


def backend_cpu(book: Any) -> float:
    """The CPU seconds of every server process of the book's Postgres (0 on SQLite)."""
    if not book.store.url.startswith("postgresql"):
        return 0.0
    with book.store.engine.connect() as connection:
        directory = connection.exec_driver_sql("SHOW data_directory").scalar()
    pid = int(Path(directory, "postmaster.pid").read_text().split()[0])
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for child in [pid, *_children(pid)]:
        try:
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / ticks
    return total


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = Path(task, "children").read_text().split()
        found += [int(child) for child in text]
    return found


def measure(url: str, participants: int, refund: bool, profile: Path | None) -> dict[str, Any]:
    import ledger

    first_uid = 10_000_000_000 + participants
    place_entries(url, participants, first_uid)
    body = (refund_body if refund else settle_body)(participants, first_uid)
    book = ledger.open_ledger(url)
    try:
        server_before = backend_cpu(book)
        profiler = cProfile.Profile() if profile else None
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        answer = book.refund(body) if refund else book.settle(body)
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)  # type: ignore[arg-type]
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        server = backend_cpu(book) - server_before
    finally:
        book.close()
    if len(answer.closed) != participants:
        raise RuntimeError(f"closed {len(answer.closed)} of {participants}")
    return {
        "participants": participants,
        "operation": "refund" if refund else "settle",
        "client_cpu_s": round(cpu, 3),
        "server_cpu_s": round(server, 3),
        "wall_s": round(wall, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--participants", type=int, default=100_000)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--refund", action="store_true", help="a Refund Tournament instead")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the request here")
    parser.add_argument(
        "--set-based-from",
        type=int,
        help="close set-based from this many items (0: always; a huge number: never)",
    )
    args = parser.parse_args()
    if args.set_based_from is not None:
        from ledger.commands import closes

        closes.SET_BASED_FROM = args.set_based_from
    with (
        tempfile.TemporaryDirectory(prefix="ledger-settle-") as tmp,
        store_url(args.store, Path(tmp), "settle") as url,
    ):
        figures = measure(url, args.participants, args.refund, args.profile)
    json.dump(figures, sys.stdout)
    print()


if __name__ == "__main__":
    main()
