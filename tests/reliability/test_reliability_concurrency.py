"""Two ``ledger serve`` processes on one Postgres, hit at the same time with the same deliveries;
and one ``ledger serve --workers 2`` on each store, whose two workers share its port.

Correctness must come from the database (unique keys, conditional updates), never from
in-process locks: so every race here runs across two processes, each with its own writer. A
deadlock or serialization failure is the server's to retry (on SQLite, a busy database is waited
for); the platform must never see a 5xx for one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

import ledger
from support.httpkit import PLACE, REFUND_BET, SETTLE, dumps, headers, server_env
from support.killable import LedgerProcess
from support.operator_calls import balances_of, deposit
from support.payloads import entry, place, refund, settle
from support.stored import ledger_check, stored_bets

THREADS = 16


@pytest.fixture
def two_servers(tmp_path: Path, postgres_url: str) -> Iterator[tuple[str, list[str]]]:
    ledger.open_ledger(postgres_url, migrate=True).close()
    env = server_env(postgres_url)
    with (
        LedgerProcess(tmp_path, env, name="a") as first,
        LedgerProcess(tmp_path, env, name="b") as second,
    ):
        yield postgres_url, [first.url, second.url]


@pytest.fixture
def two_workers(tmp_path: Path, store_url: str) -> Iterator[tuple[str, list[str]]]:
    with LedgerProcess(tmp_path, server_env(store_url), workers=2) as server:
        yield store_url, [server.url]
        # Both workers ran (and answered the health check), each with its own writer.
        assert server.output().count("Application startup complete") == 2


def hammer(urls: list[str], requests: list[tuple[str, str, bytes]]) -> list[httpx.Response]:
    """Send every request once, spread over both servers, from many threads at once."""
    clients = [httpx.Client(base_url=url, timeout=60) for url in urls]
    try:

        def send(indexed: tuple[int, tuple[str, str, bytes]]) -> httpx.Response:
            number, (path, event, body) = indexed
            http = clients[number % len(clients)]
            return http.post(path, content=body, headers=headers(event))

        with ThreadPoolExecutor(THREADS) as pool:
            return list(pool.map(send, enumerate(requests)))
    finally:
        for client in clients:
            client.close()


def same(path: str, event: str, body: object) -> list[tuple[str, str, bytes]]:
    return [(path, event, dumps(body))] * 32


def statuses(responses: list[httpx.Response]) -> Counter[int]:
    return Counter(response.status_code for response in responses)


def test_identical_deliveries_to_two_processes_hold_refund_and_settle_each_bet_once(
    two_servers: tuple[str, list[str]],
) -> None:
    identical_deliveries(*two_servers)


def test_identical_deliveries_to_two_workers_hold_refund_and_settle_each_bet_once(
    two_workers: tuple[str, list[str]],
) -> None:
    identical_deliveries(*two_workers)


def identical_deliveries(database_url: str, urls: list[str]) -> None:
    with httpx.Client(base_url=urls[0]) as http:
        deposit(http, "twin", "100.00")
    bets = place(entry(1, user="twin", pool=5), entry(2, user="twin", pool=5))

    assert statuses(hammer(urls, same("/bets", PLACE, bets))) == {200: 32}
    with httpx.Client(base_url=urls[-1]) as http:
        assert balances_of(http, "twin") == (Decimal("78.00"), Decimal("22.00"))

    cancel = refund(5, (1, "twin"))
    assert statuses(hammer(urls, same("/bets/cancel", REFUND_BET, cancel))) == {200: 32}
    results = settle(5, (2, "30.00", "twin"))
    assert statuses(hammer(urls, same("/winners", SETTLE, results))) == {200: 32}

    with httpx.Client(base_url=urls[0]) as http:
        assert balances_of(http, "twin") == (Decimal("119.00"), Decimal("0.00"))
    assert stored_bets(database_url) == {1: ("refunded", None), 2: ("settled", 3000)}
    assert ledger_check(database_url).returncode == 0


def test_entries_of_a_user_who_can_afford_only_some_never_overdraw_across_processes(
    two_servers: tuple[str, list[str]],
) -> None:
    affordable_only(*two_servers)


@pytest.mark.slow  # the default run has the identical-deliveries race across workers
def test_entries_of_a_user_who_can_afford_only_some_never_overdraw_across_workers(
    two_workers: tuple[str, list[str]],
) -> None:
    affordable_only(*two_workers)


def affordable_only(database_url: str, urls: list[str]) -> None:
    with httpx.Client(base_url=urls[0]) as http:
        deposit(http, "short", "60.50")  # 5 entries of 11.00 fit, 5.50 is left
    # 40 different entries, each sent twice (once to each server), all at the same moment.
    requests = [
        ("/bets", PLACE, dumps(place(entry(100 + number, user="short", pool=9))))
        for number in range(40)
        for _ in range(2)
    ]
    responses = hammer(urls, requests)

    assert set(statuses(responses)) <= {200, 402}, statuses(responses)
    accepted = {
        number
        for number, response in zip(range(len(requests)), responses, strict=True)
        if response.status_code == 200
    }
    placed = {uid for uid, (state, _) in stored_bets(database_url).items() if state == "placed"}
    assert len(placed) == 5
    # A bet answered 200 by either server is one of the five held; its twin agrees.
    assert {100 + number // 2 for number in accepted} == placed
    with httpx.Client(base_url=urls[-1]) as http:
        assert balances_of(http, "short") == (Decimal("5.50"), Decimal("55.00"))
    assert ledger_check(database_url).returncode == 0


def test_many_users_deposits_and_bets_across_processes_lose_no_update_and_never_5xx(
    two_servers: tuple[str, list[str]],
) -> None:
    database_url, urls = two_servers
    users = [f"busy-{index}" for index in range(4)]
    with httpx.Client(base_url=urls[0]) as http:
        for user in users:
            deposit(http, user, "1000.00")
    # Every user's entries, in pools shared by all users, settled in multi-pool requests that
    # touch every user's rows at once: the recipe for deadlocks between the two processes.
    requests = []
    for number in range(60):
        user = users[number % len(users)]
        requests.append(("/bets", PLACE, dumps(place(entry(1000 + number, user=user, pool=1)))))
    responses = hammer(urls, requests)
    assert statuses(responses) == {200: 60}
    forward = settle(1, *((1000 + n, "2.00", users[n % 4]) for n in range(60)))
    backward = settle(1, *((1000 + n, "2.00", users[n % 4]) for n in reversed(range(60))))
    closing = [("/winners", SETTLE, dumps(body)) for body in (forward, backward) * 8]
    assert statuses(hammer(urls, closing)) == {200: 16}
    with httpx.Client(base_url=urls[-1]) as http:
        for user in users:
            # 15 entries of 11.00 each, each paid 2.00.
            assert balances_of(http, user) == (Decimal("865.00"), Decimal("0.00")), user
    assert ledger_check(database_url).returncode == 0
