"""Graceful shutdown and overload, against a real ``ledger serve`` on both stores.

- SIGTERM under load: the server stops accepting, finishes and answers what is in flight, and
  exits within ``LEDGER_SHUTDOWN_TIMEOUT``; every delivery answered 200 is in the database after
  the exit, nothing is half-applied, and after a restart the platform's re-sends apply once.
- Overload: with the writer slowed (its database held locked by the test), a flood of Place Bets
  is answered 200 or 503 at once, never queued without limit: resident memory stays within a
  bound, every 200 is durable, and the re-sends of the 503s apply once.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import httpx
import psycopg
import pytest

from support.dedicated_postgres import libpq_dsn
from support.httpkit import PLACE, dumps, headers, server_env
from support.killable import LedgerProcess
from support.operator_calls import balances_of, deposit
from support.payloads import entry, place
from support.platform_driver import PlatformDriver, assert_books_match
from support.stored import stored_bets, unacknowledged_in

USERS = [f"term-u{index}" for index in range(6)]


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_under_load_answers_in_flight_work_exits_in_time_and_loses_nothing(
    tmp_path: Path, store_url: str, workers: int
) -> None:
    # With workers, SIGTERM goes to the supervisor, which passes it on to each worker.
    server = LedgerProcess(
        tmp_path, server_env(store_url, LEDGER_SHUTDOWN_TIMEOUT="10"), workers=workers
    )
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for user in USERS:
                deposit(http, user, "1000.00")
        driver = PlatformDriver(server.url, USERS, seed=21)
        with driver.running(threads=6):
            time.sleep(1.5)
            assert server.process is not None
            terminated = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            code = server.process.wait(timeout=30)
            took = time.monotonic() - terminated
            # Exited by itself, within the configured bound (plus process noise), after
            # answering what it had accepted and closing the ledger. (uvicorn re-raises the
            # signal once its graceful shutdown is complete, hence -SIGTERM.)
            assert code in (0, -signal.SIGTERM), server.output()[-3000:]
            shut_down = server.output().count("Application shutdown complete")
            assert shut_down == workers, server.output()[-3000:]
            assert took < 10 + 5, f"shutdown took {took:.1f} s"
            acknowledged = driver.acknowledged_so_far()
            lost = unacknowledged_in(stored_bets(store_url), acknowledged)
            assert not lost, "\n".join(lost[:20])
            assert len(acknowledged) > 20, "too little traffic before the SIGTERM"
            server.start()  # the platform's re-sends of everything unanswered apply once
            time.sleep(1.0)
        assert_books_match(driver, server.url, store_url)
    finally:
        server.stop()


@contextmanager
def writer_held(store_url: str) -> Iterator[None]:
    """Hold the database so that the server's writes wait: the writer is slowed, reads are not."""
    if store_url.startswith("sqlite"):
        connection = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")  # the one write lock SQLite has
        try:
            yield
        finally:
            connection.rollback()
            connection.close()
        return
    with psycopg.connect(libpq_dsn(store_url)) as pg:
        pg.execute("LOCK TABLE bets IN EXCLUSIVE MODE")  # inserts wait, reads go on
        try:
            yield
        finally:
            pg.rollback()


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_a_flood_on_a_slowed_writer_is_answered_200_or_503_with_bounded_memory(
    tmp_path: Path, store_url: str
) -> None:
    env = server_env(
        store_url,
        LEDGER_WRITER_MAX_QUEUE="32",
        LEDGER_WRITER_MAX_WAIT="1",
        LEDGER_DB_TIMEOUT="60",  # the held lock is waited for, not turned into errors
    )
    server = LedgerProcess(tmp_path, env)
    users = [f"flood-u{index}" for index in range(4)]
    bodies = {
        uid: dumps(place(entry(uid, user=users[uid % 4], amount="1.00", rake="0")))
        for uid in range(1, 801)
    }
    statuses: Counter[int] = Counter()
    refused: list[int] = []
    accepted: list[int] = []
    lock = threading.Lock()

    def send(http: httpx.Client, uid: int) -> None:
        answer = http.post("/bets", content=bodies[uid], headers=headers(PLACE))
        assert answer.status_code in (200, 503), (answer.status_code, answer.text)
        if answer.status_code == 503:
            assert answer.json()["error"] in ("store.busy", "request.timeout"), answer.text
        with lock:
            statuses[answer.status_code] += 1
            (accepted if answer.status_code == 200 else refused).append(uid)

    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        for user in users:
            deposit(http, user, "1000.00")
        baseline = server.rss_kib()
        limits = httpx.Limits(max_connections=64)
        with (
            ThreadPoolExecutor(64) as pool,
            httpx.Client(base_url=server.url, timeout=60, limits=limits) as flood,
        ):
            with writer_held(store_url):
                futures = [pool.submit(send, flood, uid) for uid in bodies]
                # While the writer waits on the lock, the flood is refused at once.
                deadline = time.monotonic() + 60
                while statuses[503] < 400 and time.monotonic() < deadline:
                    time.sleep(0.05)
                peak = server.rss_kib()
            for future in futures:
                future.result()
        # Memory stays bounded: the refused requests hold nothing (stated bound: 64 MiB).
        assert peak - baseline < 64 * 1024, (baseline, peak)
        assert statuses[503] >= 400, statuses
        # Every 200 is durable; the re-sends of the 503s apply once.
        stored = stored_bets(store_url)
        assert all(uid in stored for uid in accepted)
        for uid in sorted(refused):
            for _ in range(100):
                answer = http.post("/bets", content=bodies[uid], headers=headers(PLACE))
                if answer.status_code == 200:
                    break
                time.sleep(0.1)
            assert answer.status_code == 200, answer.text
        for uid in accepted[:50]:  # and re-sends of the accepted ones change nothing
            assert http.post("/bets", content=bodies[uid], headers=headers(PLACE)).is_success
        assert sorted(stored_bets(store_url)) == sorted(bodies)
        for user in users:
            placed = sum(1 for uid in bodies if users[uid % 4] == user)
            expected = (Decimal("1000.00") - placed, Decimal(placed))
            assert balances_of(http, user) == expected, user
