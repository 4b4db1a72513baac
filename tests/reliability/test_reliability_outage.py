"""Database outages on Postgres: 503 quickly (never 4xx, never a hang), then nothing lost.

The database is a dedicated embedded Postgres of this module's own, stopped with
``pg_ctl stop -m fast`` in the middle of platform traffic and started again. Lock and statement
timeouts are provoked by holding a user's account row from another connection.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import psycopg
import pytest

from support.dedicated_postgres import DedicatedPostgres, libpq_dsn
from support.httpkit import PLACE, dumps, headers, server_env
from support.killable import LedgerProcess
from support.operator_calls import balances_of, deposit
from support.payloads import entry, place
from support.platform_driver import PlatformDriver, assert_books_match
from support.processes import wait_until

# LEDGER_DB_TIMEOUT for these servers: also bounds the connect timeout (min(timeout, 5) s).
DB_TIMEOUT = 2.0
# No answer may take longer than this while the database is away or coming back: well under the
# platform's 2 minutes. (A request caught while Postgres restarts may wait out a few connect
# timeouts of LEDGER_DB_TIMEOUT each; seen up to about 11 s here.)
ANSWER_BOUND = 30.0

USERS = [f"outage-u{index}" for index in range(6)]


@pytest.fixture(scope="module")
def dedicated() -> Iterator[DedicatedPostgres]:
    # Not under pytest's tmp_path: that is private to root (under pytest-xdist one level deeper
    # than the server's own user can traverse), and pg_ctl runs as that user.
    root = Path(tempfile.mkdtemp(prefix="ledger-dedicated-pg-"))
    server = DedicatedPostgres(root)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_database_outage_answers_503_quickly_and_resent_deliveries_then_apply_once(
    tmp_path: Path, dedicated: DedicatedPostgres
) -> None:
    database_url = dedicated.create_database()
    env = server_env(database_url, LEDGER_DB_TIMEOUT=str(DB_TIMEOUT))
    with LedgerProcess(tmp_path, env) as server, httpx.Client(base_url=server.url) as http:
        for user in USERS:
            deposit(http, user, "1000.00")
        driver = PlatformDriver(server.url, USERS, seed=21)
        outage: list[tuple[str, int, float]] = []
        with driver.running(threads=4):
            wait_until(lambda: len(driver.acknowledged_so_far()) > 50, 30, "traffic")
            dedicated.stop()
            try:
                before = dict(driver.statuses)
                for number in range(6):
                    for path in ("/ready", "/health", "/bets"):
                        body = dumps(place(entry(900_000 + number, user=USERS[0])))
                        started = time.monotonic()
                        response = (
                            http.post(path, content=body, headers=headers(PLACE), timeout=60)
                            if path == "/bets"
                            else http.get(path, timeout=60)
                        )
                        outage.append((path, response.status_code, time.monotonic() - started))
                        if response.status_code >= 400:
                            assert "error" in response.json(), response.text
                    time.sleep(0.3)
                wait_until(
                    lambda: (
                        driver.statuses["503"] > before.get("503", 0) + 10
                        or bool(driver.unexpected)
                    ),
                    30,
                    "the traffic to hear 503",
                )
                # A database outage is never a business rejection (4xx).
                assert not driver.unexpected, "\n".join(driver.unexpected[:10])
            finally:
                dedicated.start()
            wait_until(lambda: http.get("/ready").status_code == 200, 30, "/ready after restart")
            seen = len(driver.acknowledged_so_far())
            wait_until(lambda: len(driver.acknowledged_so_far()) > seen + 50, 30, "recovery")
        statuses = {path: {status for p, status, _ in outage if p == path} for path, *_ in outage}
        assert statuses == {"/ready": {503}, "/health": {200}, "/bets": {503}}, outage
        assert max(took for *_, took in outage) < ANSWER_BOUND, outage
        assert driver.slowest < ANSWER_BOUND, driver.slowest
        # Never a 4xx: the driver records any answer but 200 and 5xx as unexpected.
        assert_books_match(driver, server.url, database_url)


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"LEDGER_DB_TIMEOUT": "1"}, "lock_timeout"),
        ({"LEDGER_DB_TIMEOUT": "30", "LEDGER_DB_STATEMENT_TIMEOUT": "1"}, "statement_timeout"),
    ],
)
def test_lock_and_statement_timeouts_answer_503_and_the_resend_applies_once(
    tmp_path: Path, dedicated: DedicatedPostgres, extra: dict[str, str], why: str
) -> None:
    database_url = dedicated.create_database()
    with (
        LedgerProcess(tmp_path, server_env(database_url, **extra)) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        deposit(http, "locked", "100.00")
        body = dumps(place(entry(1, user="locked")))
        with psycopg.connect(libpq_dsn(database_url)) as blocker:
            blocker.execute(b"SELECT * FROM accounts WHERE name = 'user:locked' FOR UPDATE")
            started = time.monotonic()
            response = http.post("/bets", content=body, headers=headers(PLACE))
            took = time.monotonic() - started
            blocker.rollback()
        assert response.status_code == 503, response.text
        assert response.json()["error"] == "store.busy", response.text
        assert took < 10, f"{why}: answered after {took:.1f} s"
        assert balances_of(http, "locked") == (Decimal(100), Decimal(0))
        for _ in range(2):
            again = http.post("/bets", content=body, headers=headers(PLACE))
            assert again.status_code == 200, again.text
        assert balances_of(http, "locked") == (Decimal(89), Decimal(11))
