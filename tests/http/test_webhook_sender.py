"""The webhook sender against a local receiver that fails in every way a receiver can: every
event arrives at least once, in order, signed; the cursor moves only after a 2xx; unwanted
types are passed over; the status and metrics say where delivery stands. On every store."""

from __future__ import annotations

import itertools
import json
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from prometheus_client import CollectorRegistry

import ledger
from ledger.events import event_dict
from ledger.http.webhooks import WebhookMetrics, WebhookSender
from ledger.stores.webhooks import WebhookTables
from ledger.webhooks import WebhookConfig, parse_config, statuses
from support.feeds import MemoryFeed
from support.receiver import Received, Receiver

SECRET = "whsec-" + "0123456789abcdef" * 2
TYPES = ("bet.placed", "deposit", "bet.settled", "withdrawal", "bet.refunded")


def config_for(receiver: Receiver, **endpoint: Any) -> WebhookConfig:
    item = {"name": "crm", "url": receiver.url, "secret": SECRET, "batch_size": 4}
    item.update(timeout=0.3, **endpoint)
    return parse_config(
        json.dumps(
            {
                "endpoints": [item],
                "lease_seconds": 3,
                "poll_seconds": 0.05,
                "retry_base_seconds": 0.02,
                "retry_cap_seconds": 0.1,
            }
        )
    )


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


async def wait_for(receiver: Receiver, ids: list[int]) -> None:
    await anyio.to_thread.run_sync(receiver.wait_for, set(ids))


async def wait_for_cursor(book: ledger.Ledger, position: int, timeout: float = 30.0) -> None:
    """Until the sender has recorded ``position``: it does so after the receiver's 2xx, so the
    receiver holding the last batch does not yet mean the cursor moved past it."""
    with anyio.fail_after(timeout):
        while True:
            rows = await anyio.to_thread.run_sync(WebhookTables(book.store).rows)
            if rows and rows[0].position >= position:
                return
            await anyio.sleep(0.02)


def batches_once(delivered: list[Received]) -> list[int]:
    """The delivered ids with a batch re-sent after its 2xx was lost counted once."""
    ids: list[int] = []
    last_key = None
    for item in delivered:
        if item.headers["idempotency-key"] != last_key:
            ids.extend(item.ids)
        last_key = item.headers["idempotency-key"]
    return ids


def test_every_event_arrives_in_order_and_signed_through_500s_timeouts_drops_and_a_restart(
    book: ledger.Ledger,
) -> None:
    feed = MemoryFeed()
    first = feed.emit(TYPES[n % 5] for n in range(14))
    with Receiver(SECRET, timeout_hold=3) as receiver:
        receiver.answer(["500", "timeout", "drop", "ok", "500", "503"])
        config = config_for(receiver)

        async def scenario() -> None:
            async with WebhookSender(config, book, source=feed):
                await wait_for(receiver, first)
                receiver.stop()  # the receiver goes away, and comes back
                later = feed.emit(TYPES[n % 5] for n in range(11))
                await anyio.sleep(0.3)
                receiver.start()
                await wait_for(receiver, later)
                await wait_for_cursor(book, 25)

        run(scenario)
    assert all(item.signed for item in receiver.received)
    assert {item.outcome for item in receiver.received} >= {"500", "timeout", "drop", "ok"}
    assert batches_once(receiver.delivered()) == list(range(1, 26))
    # Every request, failed or not, came in commit order: a batch is re-sent as it was.
    starts = [item.ids[0] for item in receiver.received]
    assert starts == sorted(starts)
    for item in receiver.received:
        assert item.ids == sorted(item.ids)
        first_id, last_id = item.headers["idempotency-key"].split("-")
        assert (int(first_id), int(last_id)) == (item.ids[0], item.ids[-1])
    (row,) = WebhookTables(book.store).rows()
    assert row.position == 25
    assert row.attempts == 0


def test_unwanted_event_types_are_never_posted_yet_move_the_cursor(book: ledger.Ledger) -> None:
    feed = MemoryFeed()
    feed.emit(["deposit", "bet.placed", "bet.placed", "withdrawal", "deposit", "bet.placed"])
    feed.emit(["bet.settled"] * 9)  # whole batches of nothing wanted
    with Receiver(SECRET) as receiver:
        config = config_for(receiver, events=["deposit", "withdrawal"])

        async def scenario() -> None:
            async with WebhookSender(config, book, source=feed):
                await wait_for(receiver, [1, 4, 5])
                with anyio.fail_after(10):
                    while WebhookTables(book.store).rows()[0].position < feed.head():
                        await anyio.sleep(0.05)

        run(scenario)
    assert receiver.delivered_ids() == [1, 4, 5]
    assert [event["type"] for item in receiver.delivered() for event in item.events] == [
        "deposit",
        "withdrawal",
        "deposit",
    ]


def test_a_failing_receiver_leaves_the_cursor_and_shows_in_the_status_and_metrics(
    book: ledger.Ledger,
) -> None:
    feed = MemoryFeed()
    feed.emit(["deposit"] * 6)
    registry = CollectorRegistry()
    with Receiver(SECRET) as receiver:
        receiver.answer(["500"] * 1000)
        config = config_for(receiver)
        sender = WebhookSender(config, book, source=feed, metrics=WebhookMetrics(registry))

        async def scenario() -> None:
            async with sender:
                with anyio.fail_after(10):
                    while len(receiver.received) < 3:
                        await anyio.sleep(0.05)
                (status,) = statuses(book, config, feed)
                assert status.to_dict() | {"last_error_at": None, "lease_until": None} == {
                    "name": "crm",
                    "url": receiver.url,
                    "cursor": 0,
                    "head": 6,
                    "lag_events": 6,
                    "lag_seconds": status.to_dict()["lag_seconds"],
                    "last_success_at": None,
                    "last_error": "HTTP 500: receiver says no",
                    "last_error_at": None,
                    "attempts": status.attempts,
                    "holder": sender.holder,
                    "lease_until": None,
                }
                assert status.attempts >= 2
                assert status.lag_seconds > 0
                crm = {"endpoint": "crm"}
                failed = {"endpoint": "crm", "outcome": "failed"}
                assert (
                    registry.get_sample_value("ledger_webhook_deliveries_total", failed) or 0
                ) >= 2
                assert registry.get_sample_value("ledger_webhook_lag_events", crm) == 6
                assert registry.get_sample_value("ledger_webhook_holding", crm) == 1

        run(scenario)
    assert {item.ids[0] for item in receiver.received} == {1}  # the same batch, again and again
    (row,) = WebhookTables(book.store).rows()
    assert row.position == 0
    # A clean stop hands the lease back at once.
    assert row.holder is None
    assert statuses(book, config, feed)[0].holder is None


def test_two_senders_on_one_database_never_post_at_once_and_one_takes_over_when_the_other_dies(
    store_url: str,
) -> None:
    feed = MemoryFeed()
    feed.emit(["deposit"] * 12)
    # Two ledgers on one database, as two replicas have: separate connections, one table.
    with (
        ledger.open_ledger(store_url) as one,
        ledger.open_ledger(store_url) as two,
        Receiver(SECRET, hold=0.05) as receiver,
    ):
        config = config_for(receiver, batch_size=2)
        first = WebhookSender(config, one, source=feed, holder="replica-1")
        second = WebhookSender(config, two, source=feed, holder="replica-2")

        async def scenario() -> None:
            await first.start()
            with anyio.fail_after(10):
                while not first.holding():
                    await anyio.sleep(0.02)
            await second.start()
            await wait_for(receiver, [1, 2, 3, 4])
            assert second.holding() == []  # a standby while the first one's lease runs
            await first.abandon()  # dies: its lease lapses by itself
            later = feed.emit(["withdrawal"] * 6)
            await wait_for(receiver, later)
            assert second.holding() == ["crm"]
            await second.stop()

        run(scenario)
    assert receiver.max_in_flight == 1
    assert all(item.signed for item in receiver.received)
    assert batches_once(receiver.delivered()) == list(range(1, 19))
    holders = [row.holder for row in WebhookTables(one.store).rows()]
    assert holders == [None]


def test_events_pruned_before_delivery_are_counted_as_missed_and_delivery_goes_on(
    book: ledger.Ledger,
) -> None:
    feed = MemoryFeed()
    feed.emit(["deposit"] * 8)
    feed.prune(5)  # retention took them before this endpoint ever received them
    registry = CollectorRegistry()
    with Receiver(SECRET) as receiver:
        sender = WebhookSender(
            config_for(receiver), book, source=feed, metrics=WebhookMetrics(registry)
        )

        async def scenario() -> None:
            async with sender:
                await wait_for(receiver, [6, 7, 8])

        run(scenario)
    assert receiver.delivered_ids() == [6, 7, 8]
    missed = registry.get_sample_value("ledger_webhook_missed_events_total", {"endpoint": "crm"})
    assert missed == 5


def test_an_embedding_process_sends_its_ledgers_own_feed_with_the_default_source(
    book: ledger.Ledger,
) -> None:
    book.deposit("u1", "EUR", "50.00", reference="d1")
    book.withdraw("u1", "EUR", "20.00", reference="w1")
    with Receiver(SECRET) as receiver:

        async def scenario() -> None:
            async with WebhookSender(config_for(receiver), book):
                await wait_for(receiver, [1, 2])
                book.deposit("u2", "EUR", "7.50", reference="d2")
                await wait_for(receiver, [3])

        run(scenario)
    posted = [event for item in receiver.delivered() for event in item.events]
    assert posted == [event_dict(event) for event in book.events(0).events]
    assert [(event["type"], event["amount"]) for event in posted] == [
        ("deposit", "50.00"),
        ("withdrawal", "20.00"),
        ("deposit", "7.50"),
    ]


@pytest.mark.slow
def test_soak_flaky_receiver_and_dying_senders_still_deliver_everything_in_order(
    store_url: str,
) -> None:
    rng = random.Random(13)
    feed = MemoryFeed()
    outcomes = ["ok"] * 6 + ["500", "503", "drop", "timeout"]
    with (
        ledger.open_ledger(store_url) as one,
        ledger.open_ledger(store_url) as two,
        Receiver(SECRET, hold=0.01, timeout_hold=1) as receiver,
    ):
        receiver.answer(rng.choice(outcomes) for _ in range(400))
        config = config_for(receiver, batch_size=7)

        async def scenario() -> None:
            senders = [WebhookSender(config, one, source=feed, holder="s0")]
            await senders[0].start()
            for round_number in range(12):
                feed.emit(rng.choice(TYPES) for _ in range(rng.randint(5, 40)))
                await anyio.sleep(rng.uniform(0.1, 0.6))
                if round_number % 4 == 3:
                    # The oldest sender dies; a new one (on the other connection pool) joins.
                    await senders.pop(0).abandon()
                    book = two if round_number % 8 == 3 else one
                    senders.append(
                        WebhookSender(config, book, source=feed, holder=f"s{round_number}")
                    )
                    await senders[-1].start()
            await wait_for(receiver, list(range(1, feed.head() + 1)))
            for sender in senders:
                await sender.stop()

        run(scenario)
    assert receiver.max_in_flight == 1
    assert all(item.signed for item in receiver.received)
    # In order: each delivered id is the next new one, or a re-send of one already delivered
    # (a dead sender's batch in flight, at most one batch per death).
    newest, resent = 0, 0
    for event_id in receiver.delivered_ids():
        if event_id <= newest:
            resent += 1
        else:
            assert event_id == newest + 1
            newest = event_id
    assert newest == feed.head()
    assert resent <= 3 * 7


class Endless(httpx.AsyncByteStream):
    """An answer body that goes on (up to 64 MB here), counting what was taken of it."""

    taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunk = b"x" * 65536
        while Endless.taken < 64 * 1024 * 1024:
            Endless.taken += len(chunk)
            yield chunk


def test_the_sender_reads_at_most_a_few_hundred_bytes_of_a_receivers_endless_answer(
    book: ledger.Ledger,
) -> None:
    feed = MemoryFeed()
    feed.emit(["deposit"] * 2)
    answers = iter([500, 200])
    Endless.taken = 0
    taken: list[int] = []

    def handler(_: httpx.Request) -> httpx.Response:
        taken.append(Endless.taken)
        return httpx.Response(next(answers, 200), stream=Endless())

    config = parse_config(
        json.dumps(
            {
                "endpoints": [
                    {"name": "crm", "url": "http://crm.test/hook", "secret": SECRET, "timeout": 5}
                ],
                "poll_seconds": 0.05,
                "retry_base_seconds": 0.02,
                "retry_cap_seconds": 0.1,
            }
        )
    )
    sender = WebhookSender(config, book, source=feed, transport=httpx.MockTransport(handler))
    errors: list[str | None] = []

    async def scenario() -> None:
        async with sender:
            await wait_for_cursor(book, 2)
            errors.extend(row.last_error for row in WebhookTables(book.store).rows())

    run(scenario)
    taken.append(Endless.taken)
    # The 500's body is quoted in part; the 200's is never read.
    assert errors == ["HTTP 500: " + "x" * 200]
    assert max(b - a for a, b in itertools.pairwise(taken)) <= 2 * 65536


def test_credentials_in_a_webhook_url_are_sent_as_basic_auth_and_never_shown(
    book: ledger.Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    feed = MemoryFeed()
    feed.emit(["deposit"])
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    url = "https://crm:s3cret-pw@crm.test/hook"
    config = parse_config(
        json.dumps(
            {
                "endpoints": [{"name": "crm", "url": url, "secret": SECRET}],
                "poll_seconds": 0.05,
            }
        )
    )
    sender = WebhookSender(config, book, source=feed, transport=httpx.MockTransport(handler))

    async def scenario() -> None:
        async with sender:
            await wait_for_cursor(book, 1)

    with caplog.at_level(logging.DEBUG):
        run(scenario)
    assert seen[0].headers["authorization"] == httpx.BasicAuth("crm", "s3cret-pw")._auth_header
    assert "s3cret" not in str(seen[0].url)
    (status,) = statuses(book, config, feed)
    assert status.to_dict()["url"] == "https://crm:***@crm.test/hook"
    assert "s3cret" not in repr(config.endpoints[0])
    assert "s3cret" not in caplog.text
