"""The event feed: every committed change appends its events, in its own transaction, numbered in
commit order; replays, refusals and failed batches append nothing. On SQLite and Postgres."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

import ledger
from ledger.commands import Move
from ledger.deliveries import Delivery
from ledger.domain import deposit
from ledger.events import Event
from ledger.stores import UnitOfWork
from ledger.stores.sql import SqlStore
from ledger.stores.webhooks import WebhookTables
from ledger.writer import GroupCommit, Single
from support import payloads as P
from support.books import batched, fail_commits, raises_key


def delivery(request_id: str | None) -> Delivery:
    return Delivery.arrived(request_id, "bet.placed", "/callbacks/place-bet", "127.0.0.1")


def feed(book: ledger.Ledger, after: int = 0) -> list[Event]:
    return book.events(after, limit=1000).events


def shapes(events: list[Event]) -> list[tuple[Any, ...]]:
    """What each event says, without its id and time."""
    return [
        (
            e.type,
            e.user,
            e.pool,
            e.bet,
            e.currency,
            e.amount,
            e.rake,
            e.payout,
            e.payout_currency,
            e.reference,
            e.request_id,
        )
        for e in events
    ]


def test_each_write_kind_appends_its_events_with_exact_amounts_and_request_id(
    book: ledger.Ledger,
) -> None:
    book.deposit("u1", "EUR", "100.00", "dep-1", request_id="op-1")
    book.submit_place_bets(
        P.place(
            P.entry(1, amount="10.00", rake="1.00"),
            P.entry(2, amount="20.00", rake="2.00"),
            P.entry(3, amount="5.00", rake="0.50"),
        ),
        delivery=delivery("req-place"),
    ).result()
    book.submit_refund(P.refund(7, 1), delivery=delivery("req-refund")).result()
    book.submit_settle(P.settle(7, (2, "25.55"), (3, "0")), delivery=delivery(None)).result()
    book.withdraw("u1", "EUR", "0.01", "wd-1")

    events = feed(book)
    assert [e.id for e in events] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert shapes(events) == [
        ("deposit", "u1", None, None, "EUR", "100.00", None, None, None, "dep-1", "op-1"),
        ("bet.placed", "u1", 7, 1, "EUR", "10.00", "1.00", None, None, None, "req-place"),
        ("bet.placed", "u1", 7, 2, "EUR", "20.00", "2.00", None, None, None, "req-place"),
        ("bet.placed", "u1", 7, 3, "EUR", "5.00", "0.50", None, None, None, "req-place"),
        ("bet.refunded", "u1", 7, 1, "EUR", "10.00", "1.00", None, None, None, "req-refund"),
        # A settle of N participants is N events; a zero payout too (the bet closed).
        ("bet.settled", "u1", 7, 2, "EUR", "20.00", "2.00", "25.55", "EUR", None, None),
        ("bet.settled", "u1", 7, 3, "EUR", "5.00", "0.50", "0.00", "EUR", None, None),
        ("withdrawal", "u1", None, None, "EUR", "0.01", None, None, None, "wd-1", None),
    ]
    assert all(e.committed_at.tzinfo is not None for e in events)
    assert book.events(8).events == []
    assert book.events(8).next == 8


def test_amounts_beyond_64_bits_are_exact(book: ledger.Ledger) -> None:
    huge = "98765432109876543210.12"
    book.deposit("u1", "EUR", huge, "big")
    [event] = feed(book)
    assert event.amount == huge


def test_a_resent_request_appends_nothing_new(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", "dep-1")
    body = P.place(P.entry(1), P.entry(2))
    book.place_bets(body)
    book.settle(P.settle(7, (1, "5.00")))
    book.refund(P.refund(7, 2))
    before = feed(book)
    assert len(before) == 5

    book.deposit("u1", "EUR", "100.00", "dep-1")
    book.place_bets(body)
    book.settle(P.settle(7, (1, "5.00")))
    book.refund(P.refund(7, 2))
    assert feed(book) == before


def test_a_refused_request_appends_nothing(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "5.00", "dep-1")
    with raises_key("user.insufficient_funds"):
        book.place_bets(P.place(P.entry(1)))
    with raises_key("user.insufficient_funds"):
        book.withdraw("u1", "EUR", "6.00", "wd-1")
    with raises_key("bet.not_found"):
        book.settle(P.settle(7, (99, "1.00")))
    assert [e.type for e in feed(book)] == ["deposit"]


def test_events_are_read_in_pages_and_by_type(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", "dep-1")
    book.place_bets(P.place(*(P.entry(n) for n in range(1, 6))))
    first = book.events(0, limit=2)
    assert [e.id for e in first.events] == [1, 2]
    assert first.next == 2
    second = book.events(first.next, limit=10)
    assert [e.id for e in second.events] == [3, 4, 5, 6]
    placed = book.events(0, types="bet.placed")
    assert [e.bet for e in placed.events] == [1, 2, 3, 4, 5]
    with raises_key("request.invalid"):
        book.events(0, types="bet.lost")
    with raises_key("request.invalid"):
        book.events("-1")


class Explode(Single):
    """Writes a deposit and its event, then fails: its savepoint must take both back."""

    size = 1

    def apply(self, uow: UnitOfWork) -> None:
        Move(deposit("u2", "EUR", 700, "doomed")).apply(uow)
        raise RuntimeError("injected failure in the middle of a unit of work")


def test_a_request_failing_inside_a_group_commit_takes_its_events_with_it(
    sqlite_book: ledger.Ledger,
) -> None:
    group = sqlite_book.writer
    assert isinstance(group, GroupCommit)
    futures = batched(
        group,
        lambda: [
            group.submit(Move(deposit("u1", "EUR", 500, "a"))),
            group.submit(Explode()),
            group.submit(Move(deposit("u3", "EUR", 500, "c"))),
        ],
    )
    assert isinstance(futures[1].exception(), RuntimeError)
    events = feed(sqlite_book)
    # Contiguous ids: the rolled-back event left no hole.
    assert [(e.id, e.user, e.reference) for e in events] == [(1, "u1", "a"), (2, "u3", "c")]


def test_a_batch_that_fails_to_commit_appends_nothing(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = sqlite_book.writer
    assert isinstance(group, GroupCommit)
    sqlite_book.deposit("u1", "EUR", "50.00", "seed")

    def submit() -> list[Future[Any]]:
        # The batch's events are written, uncommitted, before its commit fails.
        fail_commits(sqlite_book, monkeypatch)
        return [sqlite_book.submit_place_bets(P.place(P.entry(n))) for n in (1, 2)]

    futures = batched(group, submit)
    assert all(isinstance(f.exception(), ledger.StoreUnavailable) for f in futures)
    monkeypatch.undo()
    assert [e.type for e in feed(sqlite_book)] == ["deposit"]
    # The next commit's events follow on without a hole.
    sqlite_book.place_bets(P.place(P.entry(3)))
    assert [e.id for e in feed(sqlite_book)] == [1, 2]


def test_a_failed_write_on_its_own_appends_nothing(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    book.deposit("u1", "EUR", "50.00", "seed")
    fail_commits(book, monkeypatch)
    with raises_key("store.unavailable"):
        book.deposit("u1", "EUR", "1.00", "lost")
    monkeypatch.undo()
    assert [e.reference for e in feed(book)] == ["seed"]


def test_a_long_poll_returns_as_soon_as_an_event_commits(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "1.00", "first")
    waiting: Future[Any] = Future()
    started = threading.Event()

    def wait() -> None:
        started.set()
        waiting.set_result(book.wait_for_events(1, wait=55))

    thread = threading.Thread(target=wait)
    thread.start()
    assert started.wait(10)
    book.deposit("u1", "EUR", "2.00", "second")
    # Well before its 55 s wait ends (a bound against a hang, not a timing).
    page = waiting.result(timeout=45)
    thread.join()
    assert [e.reference for e in page.events] == ["second"]
    assert page.next == 2


def test_a_long_poll_without_events_answers_empty_when_its_wait_ends(
    book: ledger.Ledger,
) -> None:
    page = book.wait_for_events(0, wait=0.05)
    assert page.events == []
    assert page.next == 0
    with raises_key("request.invalid"):
        book.wait_for_events(0, wait="soon")


def test_pruning_deletes_only_events_past_the_retention(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "1.00", "old")
    book.place_bets(P.place(P.entry(1, amount="0.50", rake="0")))
    book.deposit("u1", "EUR", "1.00", "new")
    store = book.store
    assert isinstance(store, SqlStore)
    long_ago = datetime.now(UTC) - timedelta(days=200)
    with store.engine.begin() as connection:
        connection.execute(
            text("UPDATE event_commits SET committed_at = :at WHERE first_id <= 2"),
            {"at": long_ago},
        )
    assert book.prune_events(120) == 2
    assert [e.id for e in feed(book)] == [3]
    assert book.prune_events(120) == 0
    # Ids never go back after a prune.
    book.deposit("u1", "EUR", "1.00", "newer")
    assert [e.id for e in feed(book)] == [3, 4]


def _age_all_events(book: ledger.Ledger) -> None:
    store = book.store
    assert isinstance(store, SqlStore)
    with store.engine.begin() as connection:
        connection.execute(
            text("UPDATE event_commits SET committed_at = :at"),
            {"at": datetime.now(UTC) - timedelta(days=200)},
        )


def test_pruning_keeps_every_event_a_webhook_endpoint_has_not_received(
    book: ledger.Ledger,
) -> None:
    for n in range(4):
        book.deposit("u1", "EUR", "1.00", f"d{n}")
    tables = WebhookTables(book.store)
    tables.ensure(["crm", "bonus"])
    now = datetime.now(UTC)
    tables.claim("crm", "h", now, now + timedelta(seconds=30))
    tables.advance("crm", "h", 0, 4, now, delivered=True)
    tables.claim("bonus", "h", now, now + timedelta(seconds=30))
    tables.advance("bonus", "h", 0, 1, now, delivered=True)
    _age_all_events(book)
    assert book.slowest_webhook() == ("bonus", 1)
    assert book.prune_events(120) == 1  # only event 1: bonus has not received 2 to 4
    assert [e.id for e in feed(book)] == [2, 3, 4]
    assert tables.forget("bonus")
    assert not tables.forget("bonus")
    assert book.slowest_webhook() == ("crm", 4)
    assert book.prune_events(120) == 3


def test_pruning_may_be_told_to_ignore_the_webhooks(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "1.00", "d")
    WebhookTables(book.store).ensure(["crm"])  # at cursor 0: has received nothing
    _age_all_events(book)
    assert book.prune_events(120) == 0
    assert book.prune_events(120, keep_undelivered=False) == 1
    assert book.slowest_webhook() == ("crm", 0)


def test_the_appended_counter_counts_committed_events(book: ledger.Ledger) -> None:
    before = book.events_appended
    book.deposit("u1", "EUR", "10.00", "a")
    book.place_bets(P.place(P.entry(1, amount="1.00", rake="0"), P.entry(2, amount="1", rake="0")))
    book.deposit("u1", "EUR", "10.00", "a")  # a replay: nothing
    assert book.events_appended == before + 3


# --- helpers -------------------------------------------------------------------------------------


@pytest.fixture
def sqlite_book(tmp_path: Any) -> Any:
    with ledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        yield opened
