"""The delivery journal in the store: 2xx rows written with their effects, filters, paging, prune.

Every test runs on SQLite and on Postgres (the ``book`` fixture).
"""

from __future__ import annotations

import time
from concurrent.futures import wait
from datetime import UTC, datetime, timedelta

import pytest

import ledger
from ledger.commands import PlaceBets, RecordDelivery
from ledger.deliveries import Delivery, DeliveryFilter, DeliveryRecord
from ledger.domain import PlaceRequest
from ledger.errors import InsufficientFunds, InvalidRequest
from ledger.stores.deliveries import COLUMNS
from support.payloads import entry, place, refund, settle

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)


def arrival(request_id: str, event: str = "create:fantasy_team", path: str = "/bets") -> Delivery:
    return Delivery(
        received_at=datetime.now(UTC),
        started=time.perf_counter(),
        request_id=request_id,
        event=event,
        path=path,
        client="acme",
        subject="ledger",
        address="127.0.0.1",
    )


def row(
    request_id: str,
    received_at: datetime,
    *,
    status: int = 200,
    event: str = "create:fantasy_team",
    bets: tuple[int, ...] = (),
) -> DeliveryRecord:
    return DeliveryRecord(
        received_at=received_at,
        request_id=request_id,
        event=event,
        path="/bets",
        client="acme",
        subject="ledger",
        address="127.0.0.1",
        status=status,
        error=None if status == 200 else "user.insufficient_funds",
        bet_count=len(bets),
        bet_uids=bets,
        duration_us=1500,
    )


def all_of(book: ledger.Ledger, wanted: DeliveryFilter | None = None) -> list[DeliveryRecord]:
    return book.deliveries(wanted, limit=1000).items


def test_an_accepted_place_bet_writes_its_200_row_with_its_bets(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", "d1")
    future = book.submit_place_bets(place(entry(1), entry(2)), delivery=arrival("req-1"))
    future.result()
    [found] = all_of(book)
    assert (found.request_id, found.status, found.error) == ("req-1", 200, None)
    assert (found.bet_count, found.bet_uids) == (2, (1, 2))
    assert (found.client, found.subject, found.address) == ("acme", "ledger", "127.0.0.1")
    assert found.duration_us >= 0
    assert [item.request_id for item in all_of(book, DeliveryFilter(bet=2))] == ["req-1"]


def test_a_refused_command_writes_no_row_with_nothing_else(book: ledger.Ledger) -> None:
    future = book.submit_place_bets(place(entry(1)), delivery=arrival("poor"))
    with pytest.raises(InsufficientFunds):
        future.result()
    assert all_of(book) == []


def test_grouped_place_bets_journal_only_the_accepted_ones(book: ledger.Ledger) -> None:
    book.deposit("rich", "EUR", "1000.00", "d1")
    futures = {
        uid: book.submit_place_bets(
            place(entry(uid, user="rich" if uid % 2 else "poor")), delivery=arrival(f"r{uid}")
        )
        for uid in range(1, 41)
    }
    wait(list(futures.values()))
    accepted = {uid for uid, future in futures.items() if future.exception() is None}
    assert accepted == set(range(1, 41, 2))
    assert {item.request_id for item in all_of(book)} == {f"r{uid}" for uid in accepted}


def test_refund_and_settle_rows_are_written_with_their_effects(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", "d1")
    book.place_bets(place(entry(1), entry(2)))
    book.submit_refund(refund(7, 1), delivery=arrival("cancel", "destroy:fantasy_team")).result()
    won = arrival("win", "winners:tournament")
    book.submit_settle(settle(7, (2, "5.00")), delivery=won).result()
    assert [(d.request_id, d.bet_uids) for d in all_of(book)] == [("win", (2,)), ("cancel", (1,))]
    view = book.bet(2)
    assert view is not None
    assert [(d.request_id, d.status) for d in view.deliveries] == [("win", 200)]


def test_filters_narrow_the_list_and_combine(book: ledger.Ledger) -> None:
    for number in range(6):
        record = row(
            f"q{number}",
            NOW + timedelta(minutes=number),
            status=200 if number % 2 else 402,
            event="winners:tournament" if number == 5 else "create:fantasy_team",
            bets=(number, 100),
        )
        book.record_delivery(record).result()

    def ids(**fields: object) -> list[str | None]:
        return [d.request_id for d in all_of(book, DeliveryFilter(**fields))]  # type: ignore[arg-type]

    assert ids() == ["q5", "q4", "q3", "q2", "q1", "q0"]
    assert ids(request_id="q3") == ["q3"]
    assert ids(bet=4) == ["q4"]
    assert ids(bet=100) == ["q5", "q4", "q3", "q2", "q1", "q0"]
    assert ids(status=402) == ["q4", "q2", "q0"]
    assert ids(event="winners:tournament") == ["q5"]
    assert ids(since=NOW + timedelta(minutes=2), until=NOW + timedelta(minutes=4)) == ["q3", "q2"]
    assert ids(status=200, bet=100, since=NOW + timedelta(minutes=2)) == ["q5", "q3"]


def test_pages_walk_every_row_once_newest_first_even_within_one_instant(
    book: ledger.Ledger,
) -> None:
    # Three rows share each instant: the cursor's id breaks the tie.
    for number in range(9):
        book.record_delivery(row(f"p{number}", NOW + timedelta(seconds=number // 3))).result()
    seen: list[str | None] = []
    before = None
    while True:
        page = book.deliveries(limit=2, before=before)
        seen += [item.request_id for item in page.items]
        if page.next is None:
            break
        before = page.next
    assert len(seen) == 9
    assert set(seen) == {f"p{n}" for n in range(9)}
    assert seen[:3] == ["p8", "p7", "p6"]


def test_a_bad_cursor_or_limit_is_refused(book: ledger.Ledger) -> None:
    with pytest.raises(InvalidRequest) as bad:
        book.deliveries(before="bm90IGEgY3Vyc29y")
    assert bad.value.key == "request.invalid_cursor"
    with pytest.raises(InvalidRequest):
        book.deliveries(limit=0)


def test_prune_deletes_only_rows_past_the_retention_with_their_bet_links(
    book: ledger.Ledger,
) -> None:
    old = datetime.now(UTC) - timedelta(days=121)
    for number in range(5):
        book.record_delivery(row(f"old{number}", old, bets=(number,))).result()
    book.record_delivery(row("recent", datetime.now(UTC) - timedelta(days=119), bets=(1,))).result()
    assert book.prune_deliveries(120, batch=2) == 5
    assert [d.request_id for d in all_of(book)] == ["recent"]
    with book.store.unit_of_work(write=False) as uow:
        links = uow._conn.exec_driver_sql("SELECT bet_uid FROM delivery_bets").all()  # type: ignore[attr-defined]
    assert [tuple(link) for link in links] == [(1,)]
    assert [d.request_id for d in all_of(book, DeliveryFilter(bet=0))] == []
    assert [d.request_id for d in all_of(book, DeliveryFilter(bet=1))] == ["recent"]
    assert book.prune_deliveries(120) == 0


def test_filter_text_is_checked_with_a_clear_error() -> None:
    assert DeliveryFilter.parse(status="402", bet="7").status == 402
    for fields in ({"status": "abc"}, {"status": "42"}, {"bet": "x"}, {"event": "nope"}):
        with pytest.raises(InvalidRequest):
            DeliveryFilter.parse(**fields)
    with pytest.raises(InvalidRequest, match="since"):
        DeliveryFilter.parse(since="yesterday")
    assert DeliveryFilter.parse(since="2026-11-22T10:00:00+01:00").since == NOW


def test_refusal_rows_queued_among_place_bets_never_split_their_group() -> None:
    # The group commit applies deferred commands after the others and groups groupable ones
    # (tests/unit/test_writer_rules.py): a refusal's row is the one, a Place Bet the other.
    place_bet = PlaceBets(PlaceRequest([], "r1"))
    refusal = RecordDelivery(row("x1", NOW, status=402))
    assert (place_bet.groupable, place_bet.deferred) == (True, False)
    assert (refusal.groupable, refusal.deferred) == (False, True)


def test_the_record_fields_are_the_journal_columns_in_order() -> None:
    # The store writes a record's fields positionally after the id.
    assert ("id", *DeliveryRecord._fields[:-1]) == COLUMNS
