"""Webhooks across process deaths, with real ``ledger serve`` processes and the ledger's own
event feed: a server SIGKILLed mid-stream resumes from its durable cursor when it restarts, and
two servers on one Postgres never post at once, the survivor taking over from a dead holder."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import ledger
from ledger.stores.webhooks import WebhookTables
from support.httpkit import server_env
from support.killable import LedgerProcess
from support.operator_calls import OPERATOR_AUTH
from support.receiver import Receiver

SECRET = "whsec-" + "0123456789abcdef" * 2


def webhooks_env(receiver: Receiver, batch_size: int) -> str:
    endpoint = {
        "name": "crm",
        "url": receiver.url,
        "secret": SECRET,
        "batch_size": batch_size,
        "timeout": 0.5,
    }
    return json.dumps(
        {
            "endpoints": [endpoint],
            "lease_seconds": 3,
            "poll_seconds": 0.05,
            "retry_base_seconds": 0.05,
            "retry_cap_seconds": 0.2,
        }
    )


def deposits(store_url: str, start: int, count: int) -> list[int]:
    """``count`` deposits written by this process (a deposit is one event each); their ids."""
    with ledger.open_ledger(store_url) as book:
        before = book.events(0, limit=1000).events
        for n in range(start, start + count):
            book.deposit(f"u{n % 3}", "EUR", "1.00", reference=f"d{n}")
        after = book.events(before[-1].id if before else 0, limit=1000).events
    return [event.id for event in after]


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_a_sigkilled_server_resumes_from_its_cursor_losing_nothing_and_resending_one_batch(
    tmp_path: Path, store_url: str
) -> None:
    ids = deposits(store_url, 0, 40)
    with Receiver(SECRET, hold=0.15) as receiver:
        server = LedgerProcess(
            tmp_path, server_env(store_url, LEDGER_WEBHOOKS=webhooks_env(receiver, 4))
        )
        server.start()
        try:
            wait_until(lambda: len(receiver.delivered()) >= 3)
            server.kill()  # mid-stream: one batch is likely in flight
            seen = len(receiver.received)
            with ledger.open_ledger(store_url) as book:
                (row,) = WebhookTables(book.store).rows()
            cursor = row.position
            assert 0 < cursor < ids[-1]
            server.start()
            receiver.wait_for(set(ids))
        finally:
            server.stop()
    assert all(item.signed for item in receiver.received)
    delivered = {event_id for item in receiver.delivered() for event_id in item.ids}
    assert delivered == set(ids)
    # The restarted server began at its cursor: nothing at or below it was sent again; above
    # it, what the killed one sent once more is at most its one batch in flight.
    after = receiver.received[seen:]
    assert min(item.ids[0] for item in after) == cursor + 1
    resent = {i for item in after for i in item.ids} & {
        i for item in receiver.received[:seen] for i in item.ids
    }
    assert len(resent) <= 4
    starts = [item.ids[0] for item in after]
    assert starts == sorted(starts)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_two_servers_on_one_postgres_send_one_at_a_time_and_the_survivor_takes_over(
    tmp_path: Path, postgres_url: str
) -> None:
    ledger.open_ledger(postgres_url, migrate=True).close()
    first_ids = deposits(postgres_url, 0, 12)
    with Receiver(SECRET, hold=0.1) as receiver:
        env = server_env(postgres_url, LEDGER_WEBHOOKS=webhooks_env(receiver, 2))
        servers = [LedgerProcess(tmp_path, env, name=f"replica{n}") for n in (1, 2)]
        try:
            for server in servers:
                server.start()
            receiver.wait_for(set(first_ids))
            status = httpx.get(
                f"{servers[0].url}/admin/webhooks",
                headers=OPERATOR_AUTH,
                timeout=10,
            ).json()["endpoints"][0]
            holder_pid = int(status["holder"].split(":")[1])
            (holder,) = [s for s in servers if s.pid == holder_pid]
            (survivor,) = [s for s in servers if s is not holder]
            holder.kill()
            later = deposits(postgres_url, 12, 10)
            receiver.wait_for(set(later))

            def status() -> dict[str, Any]:
                found: dict[str, Any] = httpx.get(
                    f"{survivor.url}/admin/webhooks", headers=OPERATOR_AUTH, timeout=10
                ).json()["endpoints"][0]
                return found

            # The cursor moves just after the receiver's 2xx.
            wait_until(lambda: status()["cursor"] == later[-1])
            answer = status()
            assert int(answer["holder"].split(":")[1]) == survivor.pid
            assert (answer["head"], answer["lag_events"]) == (later[-1], 0)
        finally:
            for server in servers:
                server.stop()
    assert receiver.max_in_flight == 1
    assert all(item.signed for item in receiver.received)
    assert {i for item in receiver.delivered() for i in item.ids} == set(first_ids + later)
