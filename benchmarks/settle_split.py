"""Where one embedded Settle of N participants spends its time: a split by step and statement.

    .venv/bin/python benchmarks/settle_split.py --store sqlite --participants 100000
    .venv/bin/python benchmarks/settle_split.py --store postgres --participants 1000000

The same book and body as ``run.py``'s (c). Each step of the settle (decoding and validating
the body, describing the users, building the claims and the staged rows, staging, each
set-based statement of ``ledger.stores.closing``, the events, the directory's upsert, the
journal chain's content, the commit) is wrapped and timed three ways: wall seconds, CPU seconds
of the calling thread (on SQLite that is SQLite's own work too), and on Postgres the CPU seconds
of the server's processes meanwhile. On a shared machine the CPU columns are the ones to
compare. One JSON object: the totals, then the steps, largest CPU (process and server) first,
one per line.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from run import one_settle, place_entries, settle_body

# Seconds per step: wall, thread CPU, Postgres server CPU; and how many calls.
TOTALS: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
_server: list[int] = []  # the postmaster's pid, once known


def server_cpu() -> float:
    """CPU seconds of the Postgres server's processes so far, those that have exited included
    (a connection closed after a huge close takes its backend with it), 0 on SQLite."""
    if not _server:
        return 0.0
    pid, ticks, total = _server[0], os.sysconf("SC_CLK_TCK"), 0.0
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in Path(task, "children").read_text().split()]
    for process in [pid, *children]:
        try:
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        # utime, stime, and those of the children it has waited for (cutime, cstime).
        total += sum(int(field) for field in fields[11:15]) / ticks
    return total


def _timed(label: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    wall, cpu, server = time.perf_counter(), time.thread_time(), server_cpu()
    try:
        return function(*args, **kwargs)
    finally:
        step = TOTALS[label]
        step[0] += time.perf_counter() - wall
        step[1] += time.thread_time() - cpu
        step[2] += server_cpu() - server
        step[3] += 1


def wrap(owner: Any, name: str, label: str) -> None:
    function = getattr(owner, name)

    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        return _timed(label, function, *args, **kwargs)

    setattr(owner, name, timed)


def instrument() -> None:
    from ledger import contract, service
    from ledger.commands import closes
    from ledger.service import writes
    from ledger.stores import closing, sql
    from ledger.stores import directory as stored_directory
    from ledger.stores.closing import statements, writing
    from ledger.stores.sqlite.dialect import SqliteDialect

    run = statements.run

    def statement(connection: Any, sql: str, **params: Any) -> Any:
        label = "sql: " + " ".join(sql.split())[:72]
        return _timed(label, run, connection, sql, **params)

    statements.run = statement
    wrap(contract, "validate", "decode and validate the body (msgspec)")
    writes.validate = contract.validate  # type: ignore[attr-defined]
    wrap(writes, "_pools_seen", "describe the tournaments (Seen)")
    wrap(service.Ledger, "_settle_command", "build the command (request, Seen)")
    wrap(closes.SettleBets, "_staged", "staged rows, read from the request")
    for name in ("stage", "collect", "within_bounds", "write"):
        wrap(closing, name, f"closing.{name}")
    wrap(writing, "_append_events", "closing._append_events")
    wrap(writing, "_house_legs", "closing._house_legs")
    wrap(closes, "record_seen", "directory upsert (users, tournaments)")
    # The set-based close records the directory itself: the tournaments, then the users from
    # its staged items in SQL.
    wrap(stored_directory, "record_seen", "directory upsert (tournaments)")
    wrap(stored_directory, "record_staged_users", "directory upsert of the staged users (SQL)")
    wrap(closes, "journal", "delivery journal row")
    wrap(sql.SqlUnitOfWork, "commit", "commit")
    # The journal's chain: on SQLite its content is read back here (inside the commit's step); on
    # Postgres it is one statement queued with the COMMIT, inside "commit".
    wrap(SqliteDialect, "commit_content", "the chain's content, read back (SQLite)")


def measure(url: str, participants: int) -> dict[str, Any]:
    import ledger

    first_uid = 10_000_000_000 + participants
    place_entries(url, participants, first_uid)
    body = settle_body(participants, first_uid)
    instrument()
    book = ledger.open_ledger(url)
    try:
        if url.startswith("postgresql"):
            with book.store.engine.connect() as connection:  # type: ignore[attr-defined]
                directory = connection.exec_driver_sql("SHOW data_directory").scalar()
            _server.append(int(Path(directory, "postmaster.pid").read_text().split()[0]))
        TOTALS.clear()
        server = server_cpu()
        wall, cpu = time.perf_counter(), time.process_time()
        answer = book.settle(body)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        server = server_cpu() - server
    finally:
        book.close()
    if len(answer.closed) != participants:
        raise RuntimeError(f"closed {len(answer.closed)} of {participants}")
    steps = sorted(TOTALS.items(), key=lambda item: -(item[1][1] + item[1][2]))
    return {
        "participants": participants,
        "wall_s": round(wall, 2),
        "process_cpu_s": round(cpu, 2),
        "server_cpu_s": round(server, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "steps": [
            {
                "step": label,
                "wall_s": round(step[0], 3),
                "cpu_s": round(step[1], 3),
                "server_cpu_s": round(step[2], 3),
                "calls": int(step[3]),
            }
            for label, step in steps
        ],
    }


def main() -> None:
    figures = one_settle(__doc__.split("\n\n")[0], measure)
    # One JSON document, a step per line: readable as it is, and parsed whole by a test.
    steps = figures.pop("steps")
    head = json.dumps(figures)[:-1]
    lines = ",\n  ".join(json.dumps(step) for step in steps)
    print(f'{head}, "steps": [\n  {lines}\n]}}')


if __name__ == "__main__":
    main()
