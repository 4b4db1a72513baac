"""The documented production recipe run whole: Patroni, HAProxy, pgbouncer, load, faults.

``support.topology`` starts three Patroni nodes (synchronous mode, strict), two ``ledger serve``
replicas on the multi-host URL and HAProxy in front of them, from Debian's packages and from the
files in ``docs/operations/topology/``. The platform (``faults.PlatformDriver``) sends concurrent
Place Bets, refunds and settles through HAProxy, re-sending every delivery without a definitive
answer, and keeps the model of what every user must hold. Mid-load one fault is injected. After
it: every delivery answered 200 is on the new leader exactly once, every balance equals the
model, ``ledger check`` is clean, and no delivery was refused (4xx) that the model says must be
accepted. The time from the fault to the first 200 through HAProxy is printed (``-rP`` shows it):
docs/operations/high-availability.md quotes it. Timings are reported, never asserted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from support import topology as topology_module
from support.httpkit import PLACE, dumps, headers
from support.operator_calls import balances_of, deposit
from support.payloads import entry, place
from support.platform_driver import PlatformDriver, assert_books_match
from support.processes import ready_deadline, wait_until
from support.stored import (
    books_and_journal,
    journal_mismatches,
    ledger_check,
    stored_bets,
    unacknowledged_in,
)
from support.topology import PatroniNode, Topology

USERS = [f"topo-u{index}" for index in range(6)]
CENTS_10 = Decimal("0.10")


@dataclass
class TimedDriver(PlatformDriver):
    """The platform, also noting when each attempt was answered and how."""

    attempts: list[tuple[float, str]] = field(default_factory=list)

    def _count(self, what: str) -> None:
        super()._count(what)
        with self._lock:
            self.attempts.append((time.monotonic(), what))

    def recovery(self, fault_at: float) -> str:
        """From the fault to the first 200 after the last failed attempt, as one line."""
        with self._lock:
            after = [(at - fault_at, what) for at, what in self.attempts if at >= fault_at]
        failed = [(at, what) for at, what in after if what != "200"]
        last = failed[-1][0] if failed else 0.0
        first = min(at for at, what in after if what == "200" and at >= last)
        kinds = sorted({what for _, what in failed})
        outage = f"{len(failed)} failed attempts ({', '.join(kinds)})" if failed else "no failure"
        return f"fault to the first 200 through HAProxy: {first:.1f} s; {outage}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Topology]:
    topology = Topology(tmp_path)
    try:
        topology.start()
        yield topology
    finally:
        topology.close()


@pytest.fixture
def bounced(tmp_path: Path) -> Iterator[Topology]:
    topology = Topology(tmp_path, pgbouncer=True)
    try:
        topology.start()
        yield topology
    finally:
        topology.close()


def under_load(
    topology: Topology,
    fault: Callable[[], None],
    *,
    seed: int,
    name: str,
) -> TimedDriver:
    """Traffic through HAProxy, ``fault`` mid-load, traffic again after it, and the books."""
    with httpx.Client(base_url=topology.url, timeout=30) as http:
        for user in USERS:
            deposit(http, user, "1000.00")
    driver = TimedDriver(topology.url, USERS, seed=seed, give_up_after=240)
    before = topology.leader()
    with driver.running(threads=6):
        wait_until(lambda: len(driver.acknowledged_so_far()) >= 40, ready_deadline(60), "traffic")
        fault_at = time.monotonic()
        fault()
        after = len(driver.acknowledged_so_far())
        wait_until(
            lambda: len(driver.acknowledged_so_far()) >= after + 60,
            ready_deadline(180),
            f"traffic after the fault\n{topology.logs()}",
        )
    leader = topology.leader()
    database = topology.node_url(leader)
    stored, journal = books_and_journal(database)
    assert unacknowledged_in(stored, driver.acknowledged_so_far()) == []
    requests = driver.acknowledged_requests_so_far()
    assert journal_mismatches(stored, journal, requests) == []
    # Every bet as the model says (none missing, extra or closed twice), every balance equal to
    # the model, `ledger check` clean; no definitive answer but 200 (no 4xx).
    assert_books_match(driver, topology.url, database)
    print(
        f"\n{name}: {driver.recovery(fault_at)}; leader {before.name} -> {leader.name}; "
        f"{len(requests)} deliveries answered 200; answers {dict(driver.statuses)}"
    )
    return driver


@pytest.mark.topology
def test_a_planned_switchover_loses_no_acknowledged_delivery(cluster: Topology) -> None:
    old = cluster.leader()

    def switchover() -> None:
        cluster.patronictl("switchover", "--leader", old.name, "--force")

    under_load(cluster, switchover, seed=61, name="switchover")
    assert cluster.leader() is not old


@pytest.mark.topology
def test_the_leaders_postgres_killed_loses_no_acknowledged_delivery(cluster: Topology) -> None:
    under_load(
        cluster,
        lambda: cluster.leader().kill_postgres(),
        seed=62,
        name="leader's Postgres SIGKILL",
    )


@pytest.mark.topology
def test_the_leaders_whole_node_stopped_fails_over_to_the_synchronous_standby(
    cluster: Topology,
) -> None:
    old = cluster.leader()
    under_load(cluster, old.kill, seed=63, name="leader's node stopped")
    assert cluster.leader() is not old


@pytest.mark.topology
def test_one_replica_killed_is_drained_by_haproxy_and_the_other_carries_the_load(
    cluster: Topology,
) -> None:
    under_load(cluster, cluster.replicas[0].kill, seed=64, name="one replica killed")


@pytest.mark.topology
def test_pgbouncer_in_transaction_mode_carries_a_whole_run_and_a_switchover(
    bounced: Topology,
) -> None:
    old = bounced.leader()

    def switchover() -> None:
        bounced.patronictl("switchover", "--leader", old.name, "--force")

    under_load(bounced, switchover, seed=65, name="pgbouncer, switchover")
    assert bounced.leader() is not old


def test_a_missing_debian_package_fails_the_topology_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = {**topology_module.PROGRAMS, tmp_path / "absent" / "haproxy": "haproxy-of-test"}
    monkeypatch.setattr(topology_module, "PROGRAMS", programs)
    with pytest.raises(AssertionError, match=r"missing Debian package.*haproxy-of-test"):
        Topology(tmp_path)


def without_standbys(
    topology: Topology,
    lose: Callable[[PatroniNode], None],
    bring_back: Callable[[PatroniNode], None],
    *,
    name: str,
) -> None:
    """Both standbys lost for 40 s under one Place Bet re-sent all along, then one back."""
    user, uid = "strict-u", 77_000_001
    body = dumps(place(entry(uid, user=user, pool=7, amount=Decimal("1.00"), rake=CENTS_10)))
    with httpx.Client(base_url=topology.url, timeout=30) as http:
        deposit(http, user, "100.00")
    leader = topology.leader()
    standbys = [node for node in topology.nodes if node is not leader]
    lost_at = time.monotonic()
    for node in standbys:
        lose(node)
    answers: list[str] = []
    not_ready_at: float | None = None
    with httpx.Client(base_url=topology.url, timeout=15) as http:
        while time.monotonic() < lost_at + 40:
            answers.append(_attempt(http, body))
            if not_ready_at is None and topology.status("/ready") != 200:
                not_ready_at = time.monotonic() - lost_at
        # Strict: nothing is acknowledged while no standby has the WAL.
        assert "200" not in answers, answers
        back_at = time.monotonic()
        bring_back(standbys[0])
        deadline = back_at + ready_deadline(120)
        while _attempt(http, body) != "200":
            assert time.monotonic() < deadline, (
                f"no 200 after a standby came back\n{topology.logs()}"
            )
            time.sleep(0.2)
        back = time.monotonic() - back_at
    topology.wait(topology.has_leader, 60, "a leader")
    database = topology.node_url(topology.leader())
    assert stored_bets(database) == {uid: ("placed", None)}
    with httpx.Client(base_url=topology.url, timeout=30) as http:
        assert balances_of(http, user) == (Decimal("98.90"), Decimal("1.10"))
    check = ledger_check(database)
    assert check.returncode == 0, check.stdout + check.stderr
    ready = "200 throughout" if not_ready_at is None else f"503 from {not_ready_at:.1f} s"
    print(
        f"\n{name}: answers while gone {dict(Counter(answers))}; /ready {ready}; "
        f"one standby back to the first 200: {back:.1f} s"
    )


def _attempt(http: httpx.Client, body: bytes) -> str:
    try:
        return str(http.post("/bets", content=body, headers=headers(PLACE)).status_code)
    except httpx.TransportError as exc:
        return type(exc).__name__


@pytest.mark.topology
def test_strict_mode_without_a_standby_acknowledges_nothing_until_one_returns(
    cluster: Topology,
) -> None:
    without_standbys(
        cluster,
        PatroniNode.lose_postgres,
        PatroniNode.restore_postgres,
        name="both standbys' Postgres gone (DCS up)",
    )


@pytest.mark.topology
def test_two_nodes_lost_of_three_stop_writes_until_one_returns(cluster: Topology) -> None:
    without_standbys(
        cluster,
        PatroniNode.kill,
        PatroniNode.start,
        name="both standby nodes lost (DCS quorum too)",
    )
