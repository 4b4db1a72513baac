"""Failover: the primary database machine is lost mid-load and its standby promoted.

A primary and a streaming standby run on 127.0.0.1 (``support.replication``); two ``ledger serve``
replicas share them through one multi-host URL (``?host=primary&host=standby``, which the store
turns into ``target_session_attrs=read-write``). The platform (``faults.PlatformDriver``) sends
concurrent Place Bets, refunds and settles to both replicas, re-sending every delivery without a
definitive answer. Mid-load the primary's postmaster and backends are SIGKILLed (the machine is
gone) and the standby is promoted with ``pg_ctl promote``; nobody restarts the ledger processes.

With **synchronous** replication (``synchronous_commit=on``, the standby named in
``synchronous_standby_names``) a commit is acknowledged only once the standby has the WAL, so:
every delivery ever answered 200 is on the new primary exactly once, every balance equals the
platform's model and ``ledger check`` is clean. The recovery time (promotion to the first 200)
is measured and printed.

With **asynchronous** replication the primary acknowledges before the standby has the WAL: the
deliveries answered in the last moments before the kill may be missing on the new primary. The
test makes that certain by cutting the stream (the standby fell behind) before the kill. The
books stay consistent (``ledger check`` is clean: the standby replays a prefix of the primary's
history, whole transactions only), and what is missing is only acknowledged work from before the
kill, which the comparison with the platform's model finds (``ledger reconcile`` is not on this
branch; it would find the same deliveries from the platform's own records).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

import ledger
from support.httpkit import server_env
from support.killable import LedgerProcess
from support.operator_calls import deposit
from support.platform_driver import PlatformDriver, assert_books_match
from support.processes import wait_until
from support.replication import ReplicatedPostgres
from support.stored import ledger_check, stored_bets, unacknowledged_in

USERS = [f"fo-u{index}" for index in range(6)]


@dataclass
class TwoReplicaDriver(PlatformDriver):
    """The platform, its workers spread over several ledger replicas (as a load balancer would)."""

    urls: list[str] = field(default_factory=list)

    def worker(self, number: int) -> None:
        self.url = self.urls[number % len(self.urls)]
        super().worker(number)


@contextmanager
def replicated(
    tmp_path: Path, *, synchronous: bool
) -> Iterator[tuple[ReplicatedPostgres, list[LedgerProcess]]]:
    """A primary, its standby and two ledger replicas on the multi-host URL, funded users."""
    database = ReplicatedPostgres(synchronous=synchronous)
    servers: list[LedgerProcess] = []
    try:
        database.start()
        ledger.open_ledger(database.multi_host_url(), migrate=True).close()
        for name in ("replica-a", "replica-b"):
            # A short connect timeout: a host that does not answer is skipped quickly. The
            # second replica reads its reports from the standby.
            extra = {"LEDGER_READ_DATABASE_URL": database.standby.url()} if servers else {}
            env = server_env(database.multi_host_url(), LEDGER_DB_TIMEOUT="2", **extra)
            server = LedgerProcess(tmp_path, env, name=name)
            server.start()
            servers.append(server)
        with httpx.Client(base_url=servers[0].url, timeout=30) as http:
            for user in USERS:
                deposit(http, user, "1000.00")
        yield database, servers
    finally:
        for server in servers:
            server.stop()
        database.close()


def ready(server: LedgerProcess) -> int:
    try:
        return httpx.get(f"{server.url}/ready", timeout=10).status_code
    except httpx.TransportError:
        return 0


def report(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n{line}")


# About a minute: slow, so that the default run stays under ten minutes on two cores; CI runs it.
@pytest.mark.slow
def test_a_failover_to_a_synchronous_standby_loses_no_acknowledged_delivery_and_recovers_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with replicated(tmp_path, synchronous=True) as (database, servers):
        driver = TwoReplicaDriver(servers[0].url, USERS, seed=41, urls=[s.url for s in servers])
        first_answer = threading.Event()
        answered_at: list[float] = []

        def heard() -> None:
            answered_at.append(time.monotonic())
            first_answer.set()

        with driver.running(threads=8):
            wait_until(lambda: len(driver.acknowledged_so_far()) >= 60, 60, "traffic")
            assert [ready(server) for server in servers] == [200, 200]
            # The replica reading from the standby says how stale its reports may be.
            lag = httpx.get(f"{servers[1].url}/ready", timeout=10).json()["replica_lag_seconds"]
            assert 0 <= lag < 60
            database.primary.kill()
            # While no host accepts writes the replicas say so (a load balancer stops sending).
            wait_until(lambda: all(ready(s) == 503 for s in servers), 30, "/ready 503")
            promoted_at = time.monotonic()
            database.promote()
            driver.on_next_answer = heard
            # Neither replica is restarted: the pools drop the dead connections and libpq finds
            # the promoted host on its own.
            assert first_answer.wait(60), database.logs()
            after = len(driver.acknowledged_so_far())
            wait_until(lambda: len(driver.acknowledged_so_far()) >= after + 60, 60, "traffic after")
        wait_until(lambda: all(ready(s) == 200 for s in servers), 30, "/ready 200 again")

        new_primary = database.standby.url()
        assert unacknowledged_in(stored_bets(new_primary), driver.acknowledged_so_far()) == []
        # Every bet exactly as the model says (none missing, none extra, none closed twice),
        # every balance equal to the model, `ledger check` clean.
        assert_books_match(driver, servers[1].url, new_primary)
        recovery = answered_at[0] - promoted_at
        report(capsys, f"synchronous failover: promotion to the first 200 in {recovery:.2f} s")


@pytest.mark.slow
def test_a_failover_to_an_asynchronous_standby_may_lose_only_work_acknowledged_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with replicated(tmp_path, synchronous=False) as (database, servers):
        driver = TwoReplicaDriver(servers[0].url, USERS, seed=43, urls=[s.url for s in servers])
        with driver.running(threads=8):
            wait_until(lambda: len(driver.acknowledged_so_far()) >= 60, 60, "traffic")
            # The standby falls behind; the primary goes on acknowledging without it.
            database.detach_standby()
            behind = len(driver.acknowledged_so_far())
            wait_until(lambda: len(driver.acknowledged_so_far()) >= behind + 20, 60, "traffic")
            # The platform starts no new lifecycle; those in flight finish after the failover.
            driver.stop.set()
            database.primary.kill()
            database.promote()
            # Everything acknowledged from here on was committed by the new primary.
            acknowledged_by_old = {uid for uid, _ in driver.acknowledged_so_far()}

        new_primary = database.standby.url()
        stored = stored_bets(new_primary)
        lost = unacknowledged_in(stored, driver.acknowledged_so_far())
        # The books on the new primary balance: the standby replays whole transactions, a prefix
        # of the old primary's history.
        check = ledger_check(new_primary)
        assert check.returncode == 0, check.stdout + check.stderr
        # What it may lose: deliveries the old primary acknowledged before it was lost, found by
        # comparing with the platform's own records (here its model).
        assert lost, "the primary acknowledged work the standby never received"
        assert {int(line.split()[1]) for line in lost} <= acknowledged_by_old
        sent = {uid for group in driver.groups for uid, _, _ in group.bets}
        assert set(stored) <= sent, "a bet nobody sent"
        report(capsys, f"asynchronous failover: {len(lost)} acknowledged deliveries lost")
