"""The directory on both stores: tournaments and users recorded from every payload, in the
request's own transaction, and the operator's lists and records over them and over bets."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

import ledger
from ledger.commands import closes
from ledger.paging import cursor
from support import payloads as P
from support.books import raises_key


def fund(book: ledger.Ledger, *users: str) -> None:
    for user in users:
        book.deposit(user, "EUR", "1000", f"fund-{user}")


def described(book: ledger.Ledger, uid: int) -> dict[str, Any]:
    found = book.tournament(uid)
    assert found is not None
    return found.to_dict()


def test_place_bet_records_the_tournament_and_the_user_as_described(book: ledger.Ledger) -> None:
    fund(book, "u1")
    book.place_bets(P.place(P.entry(1, user="u1", pool=7)))
    tournament = described(book, 7)
    assert tournament["name"] == "Tournament 7"
    assert tournament["currency"] == "EUR"
    assert tournament["category"] == "admin_created"
    assert tournament["status"] is None  # Place Bet carries no status
    assert tournament["entries"] == {"placed": 1}
    assert tournament["first_seen"] == tournament["last_seen"]
    user = book.user("u1")
    assert user is not None
    assert (user.name, user.client) == ("name-u1", "acme")
    assert user.balances is not None
    assert [b.to_dict() for b in user.balances] == [
        {"currency": "EUR", "available": "989.00", "held": "11.00"}
    ]


def test_a_changed_name_keeps_its_latest_value_and_an_absent_field_keeps_the_known_one(
    book: ledger.Ledger,
) -> None:
    fund(book, "u1")
    book.place_bets(P.place(P.entry(1, pool=7)))
    renamed = P.entry(2, pool=7)
    renamed["pool"]["name"] = "Sunday Cup"
    renamed["user"]["name"] = "Neo"
    book.place_bets(P.place(renamed))
    # A refund names neither the tournament nor (here) the user: their names stay.
    body = P.refund(7, 2)
    del body["pools"][0]["bets"][0]["user"]["name"]
    book.refund(body)
    tournament = described(book, 7)
    assert tournament["name"] == "Sunday Cup"
    assert tournament["status"] == "cancelled"
    assert tournament["game_type"] == "football"
    assert tournament["entries"] == {"placed": 1, "refunded": 1}
    assert tournament["last_seen"] > tournament["first_seen"]
    user = book.user("u1")
    assert user is not None
    assert user.name == "Neo"


def test_settle_records_the_last_status_and_the_estimated_end_time(book: ledger.Ledger) -> None:
    fund(book, "u1", "u2")
    book.place_bets(P.place(P.entry(1, user="u1"), P.entry(2, user="u2")))
    body = P.settle(7, (1, "30.00", "u1"), (2, "0.00", "u2"))
    body["pools"][0]["pool"].update(
        name="Final", gameType="hockey", estimatedEndTime="2026-11-22T18:30:00+01:00"
    )
    book.settle(body)
    tournament = described(book, 7)
    assert tournament["status"] == "closed"
    assert tournament["name"] == "Final"
    assert tournament["game_type"] == "hockey"
    assert tournament["estimated_end_time"] == "2026-11-22T17:30:00+00:00"
    assert tournament["entries"] == {"settled": 2}
    assert tournament["currencies"][0]["payouts"] == {"EUR": "30.00"}


@pytest.mark.parametrize(
    ("end", "name"),
    [
        ("next tuesday", "x" * 300),
        (12345, "bad\x00name"),
        ("2026-13-45T99:00:00Z", 42),
    ],
)
def test_malformed_descriptions_never_refuse_the_money_and_are_not_stored(
    book: ledger.Ledger, end: Any, name: Any
) -> None:
    fund(book, "u1")
    body = P.entry(1)
    body["pool"].update(name=name, estimatedEndTime=end)
    body["user"]["name"] = name
    assert book.place_bets(P.place(body)).placed == [1]
    tournament = described(book, 7)
    assert tournament["estimated_end_time"] is None
    expected = name[:255] if isinstance(name, str) and "\x00" not in name else None
    assert tournament["name"] == expected
    user = book.user("u1")
    assert user is not None
    assert user.name == expected


def test_a_refused_place_bet_records_nobody(book: ledger.Ledger) -> None:
    with raises_key("user.insufficient_funds"):
        book.place_bets(P.place(P.entry(1, user="broke", pool=9)))
    assert book.tournament(9) is None
    assert book.user("broke") is None


def test_concurrent_place_bets_in_one_group_record_each_tournament_and_user_once(
    book: ledger.Ledger,
) -> None:
    fund(book, *(f"u{n}" for n in range(4)))
    futures = [
        book.submit_place_bets(P.place(P.entry(uid, user=f"u{uid % 4}", pool=uid % 3)))
        for uid in range(1, 41)
    ]
    assert all(future.result().placed for future in futures)
    listed = book.tournaments(limit=10)
    assert sorted(item.uid for item in listed.items) == [0, 1, 2]
    assert sum(sum(item.entries.values()) for item in listed.items) == 40
    assert sorted(item.uid for item in book.users(limit=10).items) == [f"u{n}" for n in range(4)]


def test_lists_page_newest_first_by_cursor_without_repeats(book: ledger.Ledger) -> None:
    fund(book, "u1")
    for pool in (1, 2, 3, 4, 5):
        book.place_bets(P.place(P.entry(100 + pool, pool=pool)))
    first = book.tournaments(limit=2)
    assert [item.uid for item in first.items] == [5, 4]
    second = book.tournaments(limit=2, before=first.next)
    assert [item.uid for item in second.items] == [3, 2]
    third = book.tournaments(limit=2, before=second.next)
    assert [item.uid for item in third.items] == [1]
    assert third.next is None
    bets = book.bets(user="u1", limit=3)
    assert [bet.uid for bet in bets.items] == [105, 104, 103]
    rest = book.bets(user="u1", limit=3, before=bets.next)
    assert [bet.uid for bet in rest.items] == [102, 101]
    assert rest.next is None


def test_filters_and_case_insensitive_substring_search(book: ledger.Ledger) -> None:
    fund(book, "alice", "bob")
    sunday = P.entry(1, user="alice", pool=70)
    sunday["pool"]["name"] = "Sunday CUP"
    sunday["user"]["name"] = "Alice Liddell"
    book.place_bets(P.place(sunday, P.entry(2, user="bob", pool=81)))
    book.refund(P.refund(81, (2, "bob")))

    def uids(page: Any) -> list[Any]:
        return [item.uid for item in page.items]

    assert uids(book.tournaments(search="cup")) == [70]
    assert uids(book.tournaments(search="8")) == [81]  # a substring of the uid
    assert uids(book.tournaments(status="cancelled")) == [81]
    assert uids(book.tournaments(status="closed")) == []
    assert uids(book.users(search="LIDD")) == ["alice"]  # the name
    assert uids(book.users(search="OB")) == ["bob"]  # the uid
    assert uids(book.users(search="%")) == []  # wildcards are taken literally
    assert uids(book.bets(pool=81)) == [2]
    assert uids(book.bets(state="refunded")) == [2]
    assert uids(book.bets(user="alice", state="placed")) == [1]
    with raises_key("request.invalid"):
        book.bets(state="lost")


def test_a_cursor_the_api_did_not_give_is_refused(book: ledger.Ledger) -> None:
    for read in (book.tournaments, book.users, book.bets):
        with raises_key("request.invalid_cursor"):
            read(before="not-a-cursor")
    with raises_key("request.invalid_cursor"):
        book.tournaments(before=cursor("yesterday", 1))


def test_an_unknown_user_tournament_or_bet_is_none_and_a_deposit_makes_a_user_known(
    book: ledger.Ledger,
) -> None:
    assert book.user("ghost") is None
    assert book.tournament(404) is None
    assert book.bet(404) is None
    book.deposit("ghost", "EUR", "5", "d1")
    found = book.user("ghost")
    assert found is not None
    assert (found.name, found.first_seen) == (None, None)
    assert found.balances is not None
    assert found.balances[0].available == Decimal("5.00")


def test_the_bet_view_names_its_user_and_tournament_and_lists_its_postings(
    book: ledger.Ledger,
) -> None:
    fund(book, "u1")
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, "25.00")))
    found = book.bet(1)
    assert found is not None
    shown = found.to_dict()
    assert (shown["user_name"], shown["pool_name"]) == ("name-u1", "Tournament 7")
    assert shown["placed_at"] is not None
    assert shown["closed_at"] is not None
    legs = [(leg["kind"], leg["account"], leg["amount"]) for leg in shown["postings"]]
    assert legs == [
        ("hold", "available", "-11.00"),
        ("hold", "held", "11.00"),
        ("settle", "held", "-11.00"),
        ("settle", "available", "25.00"),
    ]
    assert datetime.fromisoformat(shown["postings"][0]["created_at"]).tzinfo == UTC


class _Clock:
    """Stands in for :class:`datetime` in the store's module: ``now()`` is what the test says."""

    at = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)

    @classmethod
    def now(cls, tz: Any = None) -> datetime:
        return cls.at


def test_an_unchanged_row_is_rewritten_at_most_once_a_minute_and_a_change_at_once(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ledger.stores.sql.datetime", _Clock)

    def seen_at(second: int, uid: int, name: str = "name-u1") -> tuple[datetime, datetime]:
        _Clock.at = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC).replace(
            minute=second // 60, second=second % 60
        )
        entry = P.entry(uid, user="u1", pool=7)
        entry["user"]["name"] = name
        book.place_bets(P.place(entry))
        user, tournament = book.user("u1"), book.tournament(7)
        assert user is not None
        assert user.last_seen is not None
        assert tournament is not None
        return user.last_seen, tournament.last_seen

    fund(book, "u1")
    first = seen_at(5, 1)
    assert seen_at(40, 2) == first  # same minute, nothing new: neither row rewritten
    user_seen, tournament_seen = seen_at(50, 3, name="Neo")  # the user changed, not the pool
    assert (user_seen.second, tournament_seen) == (50, first[1])
    renamed = book.user("u1")
    assert renamed is not None
    assert renamed.name == "Neo"
    later = seen_at(70, 4, name="Neo")  # a new minute: both rows say when they were last seen
    assert [moment.astimezone(UTC).second for moment in later] == [10, 10]


@pytest.mark.parametrize("set_based", [False, True], ids=["bet-by-bet", "set-based"])
def test_a_settle_or_refund_renames_its_users_but_they_stay_last_seen_when_they_entered(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch, set_based: bool
) -> None:
    monkeypatch.setattr("ledger.stores.sql.datetime", _Clock)
    if set_based:
        monkeypatch.setattr(closes, "SET_BASED_FROM", 2)
    fund(book, "u1", "u2", "u3")
    _Clock.at = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)
    book.place_bets(P.place(*(P.entry(uid, user=f"u{uid}") for uid in (1, 2, 3))))
    entered = {uid: book.user(uid) for uid in ("u1", "u2", "u3")}
    _Clock.at = datetime(2026, 11, 22, 14, 30, 0, tzinfo=UTC)
    body = P.settle(7, (1, "30.00", "u1"), (2, "0.00", "u2"))
    body["pools"][0]["bets"][0]["user"]["name"] = "Neo"
    book.settle(body)
    book.refund(P.refund(7, (3, "u3")))
    for uid, before in entered.items():
        after = book.user(uid)
        assert before is not None
        assert after is not None
        assert (after.first_seen, after.last_seen) == (before.first_seen, before.last_seen)
        assert after.name == ("Neo" if uid == "u1" else f"name-{uid}")
    tournament = book.tournament(7)
    assert tournament is not None
    assert tournament.last_seen.astimezone(UTC) == _Clock.at  # the tournament was described
