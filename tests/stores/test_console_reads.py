"""The console overview's two reads on every store: activity per hour (entries, stakes, payouts)
and the last hours' deliveries counted by event and outcome.

Each test runs once on SQLite and once on Postgres (the ``book`` fixture).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal

import pytest

import ledger
import ledger.stores.sql
from ledger.deliveries import DeliveryRecord
from ledger.stores import DeliveryCount
from support import payloads as P
from support.books import raises_key

D = Decimal
NOW = datetime(2026, 11, 22, 12, 30, tzinfo=UTC)


class Clock(datetime):
    """The store's clock, set by the test: bets are stamped with ``Clock.moment``."""

    moment = NOW

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> Clock:
        return cls.fromtimestamp(cls.moment.timestamp(), tz)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> type[Clock]:
    monkeypatch.setattr(ledger.stores.sql, "datetime", Clock)
    return Clock


def test_activity_counts_entries_stakes_and_payouts_in_the_hour_they_happened(
    book: ledger.Ledger, clock: type[Clock]
) -> None:
    book.deposit("u1", "EUR", "100.00", reference="seed")
    book.deposit("u2", "JPY", "5000", reference="seed-jpy")
    # Bet 4 six days and 23 hours ago; bets 1 and 2 at 09:00:00 and 09:59:59.999 (one hour),
    # bet 3 at 10:00 sharp; the settle of 1 and 2 at 11:15.
    clock.moment = NOW - timedelta(days=6, hours=23)
    book.place_bets(P.place(P.entry(4, user="u2", pool=9, currency="JPY", amount="300", rake="0")))
    clock.moment = datetime(2026, 11, 22, 9, tzinfo=UTC)
    book.place_bets(P.place(P.entry(1, pool=7)))
    clock.moment = datetime(2026, 11, 22, 9, 59, 59, 999000, tzinfo=UTC)
    book.place_bets(P.place(P.entry(2, pool=7)))
    clock.moment = datetime(2026, 11, 22, 10, tzinfo=UTC)
    book.place_bets(P.place(P.entry(3, pool=8)))
    clock.moment = datetime(2026, 11, 22, 11, 15, tzinfo=UTC)
    book.settle(P.settle(7, (1, "4.50"), (2, "0")))

    rows = [
        (row.hour, row.currency, row.entries, row.stakes, row.payouts)
        for row in book.activity(7, now=NOW)
    ]
    assert rows == [
        (datetime(2026, 11, 15, 13, tzinfo=UTC), "JPY", 1, D("300"), D("0")),
        (datetime(2026, 11, 22, 9, tzinfo=UTC), "EUR", 2, D("20.00"), D("0.00")),
        (datetime(2026, 11, 22, 10, tzinfo=UTC), "EUR", 1, D("10.00"), D("0.00")),
        (datetime(2026, 11, 22, 11, tzinfo=UTC), "EUR", 0, D("0.00"), D("4.50")),
    ]
    assert book.activity(7, now=NOW)[0].to_dict() == {
        "hour": "2026-11-15T13:00:00+00:00",
        "currency": "JPY",
        "entries": 1,
        "stakes": "300",
        "payouts": "0",
    }
    # A day's window leaves out the entry of last week; the hour ending at now is in it.
    assert [row.currency for row in book.activity(1, now=NOW)] == ["EUR", "EUR", "EUR"]
    assert book.activity(1, now=datetime(2026, 11, 22, 9, 30, tzinfo=UTC))[0].entries == 1
    with raises_key("request.invalid"):
        book.activity(0)


def record(received_at: datetime, event: str, status: int, error: str | None) -> DeliveryRecord:
    return DeliveryRecord(
        received_at, "r", event, "/bets", "acme", "ledger", "127.0.0.1", status, error, 0, (), 9
    )


def test_delivery_counts_group_the_last_hours_by_event_status_and_error(
    book: ledger.Ledger,
) -> None:
    place, cancel = "create:fantasy_team", "destroy:fantasy_team"
    for received, event, status, error in [
        (NOW - timedelta(minutes=1), place, 200, None),
        (NOW - timedelta(hours=2), place, 200, None),
        (NOW - timedelta(hours=3), place, 402, "user.insufficient_funds"),
        (NOW - timedelta(hours=23, minutes=59), cancel, 200, None),
        (NOW - timedelta(hours=25), place, 500, "store.unavailable"),  # too old
    ]:
        book.record_delivery(record(received, event, status, error)).result()
    assert book.delivery_counts(24, now=NOW) == [
        DeliveryCount(place, 200, None, 2),
        DeliveryCount(place, 402, "user.insufficient_funds", 1),
        DeliveryCount(cancel, 200, None, 1),
    ]
    assert book.delivery_counts(1, now=NOW) == [DeliveryCount(place, 200, None, 1)]
