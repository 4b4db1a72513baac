"""The Place Bet writer process's own work, by phase: what (a)'s critical path costs a Place Bet.

    .venv/bin/python benchmarks/writer_child.py [--batch 32] [--place-bets 20000] [--db URL]

Under benchmark (a) the server's writer process (``ledger.writer.child.child_main``) is the
critical path: it takes every Place Bet waiting in its pipe, applies them as one batch
(``GroupCommit.apply_now``: one commit) and reports their outcomes, while the event loop
gathers the next batch. This runs that loop alone, without HTTP or a pipe: one-bet Place Bets
built as the server builds them (``Ledger.submit_place_bets``' command, with its delivery),
pickled in batches of ``--batch`` by the pipe's own pickler (``ledger.writer.pipe``, as the
server sends them), unpickled, applied and their outcomes pickled as the child does. It prints
the CPU microseconds a Place Bet of the whole loop (user and kernel) and of each phase (the
thread's CPU inside each wrapped step; a phase inside another counts in both), and, on SQLite,
each statement's (by its verb and table: SQLite runs in the calling thread, so that is the
database's own work for it, triggers and checks included) and how many pages of the write-ahead
log a commit wrote. The first whole batches of at least 500 Place Bets warm the caches and are
not counted. Every run places bets of its own, so a database measured before (``--db``) is
measured again on new Place Bets, not on re-sends. One JSON object.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import itertools
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import servers

WARM = 500
PHASES: collections.Counter[str] = collections.Counter()  # thread CPU ns per phase
STATEMENTS: collections.Counter[str] = collections.Counter()  # thread CPU ns per statement


def _timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time_ns()
        try:
            return function(*args, **kwargs)
        finally:
            PHASES[label] += time.thread_time_ns() - started

    return timed


def instrument() -> None:
    """Wrap the steps of a Place Bet batch (what ``ledger.writer.child.child_main`` reaches)."""
    from sqlalchemy.engine import Connection

    from ledger import domain
    from ledger.commands import places
    from ledger.stores import sql
    from ledger.stores.postgres.dialect import PostgresDialect
    from ledger.stores.sqlite.dialect import SqliteDialect

    steps = {
        "decision (balances read, domain)": (places, "_decide_places"),
        "decision: the domain alone": (domain, "place_many"),
        "post (transactions, postings, balances)": (sql.SqlUnitOfWork, "post"),
        "bets and open holds": (sql.SqlUnitOfWork, "add_bets"),
        "delivery journal": (sql.SqlUnitOfWork, "record_deliveries"),
        "events": (sql.SqlUnitOfWork, "append_events"),
        "directory (users, tournaments)": (sql.SqlUnitOfWork, "record_seen"),
        "unit of work begin": (sql.SqlUnitOfWork, "__enter__"),
        "unit of work end": (sql.SqlUnitOfWork, "__exit__"),
        "commit": (sql.SqlUnitOfWork, "commit"),
        # Parts of the commit: the database's own (on Postgres it carries the writes held for
        # it), and the journal chain's content and record.
        "commit: the database's COMMIT": (Connection, "commit"),
    }
    for label, (owner, name) in steps.items():
        setattr(owner, name, _timed(label, getattr(owner, name)))
    for dialect in (SqliteDialect, PostgresDialect):
        for label, name in (
            ("commit: the chain's content", "commit_content"),
            ("commit: the chain's record", "seal_chain"),
        ):
            setattr(dialect, name, _timed(label, getattr(dialect, name)))
    _time_statements()


def statement_label(sql: str) -> str:
    """A statement by its verb and first table: ``INSERT INTO bets``, ``SELECT FROM accounts``."""
    words = sql.split()
    if words[0].upper() == "SELECT":
        after = [
            word
            for before, word in itertools.pairwise(words)
            if before.upper() == "FROM" and not word.startswith("(")
        ]
        return f"SELECT FROM {after[0] if after else '?'}"
    return " ".join(words[:3] if words[0].upper() in ("INSERT", "DELETE") else words[:2])


def _time_statements() -> None:
    """Time every statement the SQLite write path sends its driver (``driver.run``, imported by
    name by each module that uses it)."""
    from ledger.stores.sqlite import driver

    original = driver.run

    def run(connection: Any, sql: str, parameters: Any = (), *, many: bool = False) -> Any:
        started = time.thread_time_ns()
        try:
            return original(connection, sql, parameters, many=many)
        finally:
            STATEMENTS[statement_label(sql)] += time.thread_time_ns() - started

    for module in list(sys.modules.values()):
        if (
            module is not None
            and module.__name__.startswith("ledger")
            and (getattr(module, "run", None) is original)
        ):
            module.run = run  # type: ignore[attr-defined]


def wal_frames(shm: int) -> int:
    """The frames in a SQLite database's write-ahead log now: ``mxFrame`` of the wal-index
    header at the start of its ``-shm`` file (open as ``shm``), in native byte order."""
    return int.from_bytes(os.pread(shm, 4, 16), sys.byteorder)


def measure(url: str, batch: int, place_bets: int) -> dict[str, Any]:
    import ledger
    from ledger.deliveries import Delivery
    from ledger.writer import GroupCommit, pipe

    book = ledger.open_ledger(url)
    try:
        for n in range(servers.USERS):
            book.deposit(f"u{n}", "EUR", "100000000.00", f"fund-{n}")
        warm = -(-WARM // batch)  # batches
        # Bets of their own on every run, numbered as wrk's are: on a database measured before
        # (--db), the same uids would be re-sends, answered with no bet, posting or event written.
        first = servers.first_uid()
        commands = [
            book._place_command(
                servers.place_bet_body(uid),
                Delivery.arrived(None, "create:fantasy_team", "/bets", "127.0.0.1").caller(
                    "bench", "bench"
                ),
            )
            for uid in range(first, first + warm * batch + place_bets)
        ]
        messages = [
            pipe.dumps(list(enumerate(commands[start : start + batch])))
            for start in range(0, len(commands), batch)
        ]
        del commands
        writer = book.writer
        if not isinstance(writer, GroupCommit):
            raise SystemExit("the ledger's writer is not a group commit: not the writer's loop")

        def one(message: bytes) -> None:
            received = pipe.loads(message)
            answers = writer.apply_now([command for _, command in received])
            # As the child reports them (a raced command's future is reported later, apart).
            outcomes = [
                (ident, *answer)
                for (ident, _), answer in zip(received, answers, strict=True)
                if isinstance(answer, tuple)
            ]
            pipe.dumps(outcomes)

        for message in messages[:warm]:
            one(message)
        gc.freeze()  # as the writer process does (ledger.writer_process.freeze_heap)
        counted = messages[warm:]
        placed = sum(len(pipe.loads(message)) for message in counted)
        instrument()
        PHASES.clear()
        STATEMENTS.clear()
        # One read of 4 bytes around each batch (the database's wal-index is there after the
        # warm-up), so that counting the log's pages costs the loop next to nothing.
        shm = (
            os.open(url.removeprefix("sqlite:///") + "-shm", os.O_RDONLY)
            if url.startswith("sqlite")
            else None
        )
        frames = 0
        before = resource.getrusage(resource.RUSAGE_THREAD)
        wall = time.perf_counter()
        for message in counted:
            if shm is not None:
                start = wal_frames(shm)
            one(message)
            if shm is not None:
                end = wal_frames(shm)
                # Fewer than before: a checkpoint had emptied the log and this batch's commit
                # started it again from its first frame.
                frames += end - start if end >= start else end
        wall = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_THREAD)
        if shm is not None:
            os.close(shm)
    finally:
        book.close()
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    result: dict[str, Any] = {
        "batch": batch,
        "place_bets": placed,
        "cpu_us_per_place_bet": round((user + system) / placed * 1e6, 1),
        "user_us": round(user / placed * 1e6, 1),
        "kernel_us": round(system / placed * 1e6, 1),
        "wall_us_per_place_bet": round(wall / placed * 1e6, 1),
        "phases_us_per_place_bet": {
            label: round(ns / placed / 1000, 1) for label, ns in PHASES.most_common()
        },
    }
    if shm is not None:
        result["statements_us_per_place_bet"] = {
            label: round(ns / placed / 1000, 1) for label, ns in STATEMENTS.most_common()
        }
        result["wal_pages_per_commit"] = round(frames / len(counted), 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32, help="Place Bets a batch (a commit)")
    parser.add_argument("--place-bets", type=int, default=20_000, help="Place Bets counted")
    parser.add_argument("--db", help="database URL (default: a new SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-child-") as tmp:
        url = args.db or f"sqlite:///{tmp}/child.db"
        print(json.dumps(measure(url, args.batch, args.place_bets), indent=1))


if __name__ == "__main__":
    main()
