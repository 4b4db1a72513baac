"""The store contract suite: every rule of DESIGN sections 4 and 5, on every store.

Each test runs once on SQLite and once on Postgres (the ``book`` fixture). Every test ends with
``check()`` clean, by the autouse fixture at the bottom.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy.exc import DBAPIError

import ledger
from support import payloads as P
from support.books import FailingStore, balance, execute_raw, house, raises_key

D = Decimal


@pytest.fixture(autouse=True)
def _books_stay_balanced(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every scenario the journal's four invariants hold."""
    # Requested during set-up, so that the ledger is still open at tear-down.
    book: ledger.Ledger | None = (
        request.getfixturevalue("book") if "book" in request.fixturenames else None
    )
    yield
    if book is not None:
        report = book.check()
        assert report.ok, report.problems


def funded(book: ledger.Ledger, amount: str = "100.00", user: str = "u1") -> ledger.Ledger:
    book.deposit(user, "EUR", amount, reference=f"seed-{user}")
    return book


# --- DESIGN section 5, row "unknown" ----------------------------------------------------------


def test_place_bet_on_unknown_bet_holds_amount_plus_rake(book: ledger.Ledger) -> None:
    funded(book)
    result = book.place_bets(P.place(P.entry(1, amount=D("10.00"), rake=D("1.00"))))
    assert result.placed == [1]
    assert result.unchanged == []
    assert "ledger_ref" in result.secrets
    assert balance(book, "u1") == (D("89.00"), D("11.00"))
    view = book.bet(1)
    assert view is not None
    assert (view.state, view.funding, view.amount, view.rake) == ("placed", "cash", D(10), D(1))
    assert view.secrets == result.secrets


def test_refund_of_unknown_bet_is_not_found(book: ledger.Ledger) -> None:
    with raises_key("bet.not_found") as info:
        book.refund(P.refund(7, 404))
    assert info.value.status == 404


def test_settle_of_unknown_bet_is_not_found(book: ledger.Ledger) -> None:
    with raises_key("bet.not_found"):
        book.settle(P.settle(7, (404, "5.00")))


def test_unaffordable_place_bet_is_refused_with_402(book: ledger.Ledger) -> None:
    funded(book, "5.00")
    with raises_key("user.insufficient_funds") as info:
        book.place_bets(P.place(P.entry(1)))
    assert info.value.status == 402
    assert book.bet(1) is None
    assert balance(book, "u1") == (D("5.00"), D("0.00"))


def test_user_who_never_deposited_cannot_place_a_paid_bet(book: ledger.Ledger) -> None:
    with raises_key("user.insufficient_funds"):
        book.place_bets(P.place(P.entry(1, user="stranger")))
    assert book.bet(1) is None


# --- row "placed" -----------------------------------------------------------------------------


def test_resent_place_bet_debits_once(book: ledger.Ledger) -> None:
    funded(book)
    first = book.place_bets(P.place(P.entry(1)))
    again = book.place_bets(P.place(P.entry(1)))
    assert again.placed == []
    assert again.unchanged == [1]
    # The re-send answers the secrets the platform already stored.
    assert again.secrets == first.secrets
    assert balance(book, "u1") == (D("89.00"), D("11.00"))


@pytest.mark.parametrize(
    "change",
    [
        {"user": "u2"},
        {"pool": 8},
        {"amount": D("10.01")},
        {"rake": D("0.50")},
        {"currency": "USD"},
    ],
    ids=["user", "pool", "amount", "rake", "currency"],
)
def test_place_bet_resent_with_different_terms_is_a_conflict(
    book: ledger.Ledger, change: dict[str, Any]
) -> None:
    funded(book)
    funded(book, user="u2")
    book.deposit("u1", "USD", "100", reference="usd")
    book.place_bets(P.place(P.entry(1)))
    with raises_key("bet.conflict") as info:
        book.place_bets(P.place(P.entry(1, **change)))
    assert info.value.status == 409
    assert balance(book, "u1") == (D("89.00"), D("11.00"))
    assert balance(book, "u2") == (D("100.00"), D("0.00"))


def test_refund_of_placed_bet_returns_the_hold(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    result = book.refund(P.refund(7, 1))
    assert result.closed == [1]
    assert result.unchanged == []
    assert balance(book, "u1") == (D("100.00"), D("0.00"))
    view = book.bet(1)
    assert view is not None
    assert view.state == "refunded"


def test_refund_uses_recorded_amounts_not_the_payloads(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    body = P.refund(7, 1)
    body["pools"][0]["bets"][0]["bet"].update(amount=D("50.00"), rake=D("9.00"))
    book.refund(body)
    assert balance(book, "u1") == (D("100.00"), D("0.00"))


def test_settle_of_placed_bet_captures_hold_and_pays_out(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    result = book.settle(P.settle(7, (1, "25.50")))
    assert result.closed == [1]
    assert balance(book, "u1") == (D("114.50"), D("0.00"))
    assert house(book, "house:entries") == 1000
    assert house(book, "house:rake") == 100
    assert house(book, "house:prizes") == -2550
    view = book.bet(1)
    assert view is not None
    assert (view.state, view.payout, view.payout_currency) == ("settled", D("25.50"), "EUR")


def test_refund_naming_another_user_is_a_conflict(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    with raises_key("bet.conflict"):
        book.refund(P.refund(7, (1, "u2")))
    with raises_key("bet.conflict"):
        book.refund(P.refund(8, 1))
    assert balance(book, "u1") == (D("89.00"), D("11.00"))


def test_settle_naming_another_user_is_a_conflict(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    with raises_key("bet.conflict"):
        book.settle(P.settle(7, (1, "5.00", "u2")))
    assert balance(book, "u1") == (D("89.00"), D("11.00"))


# --- row "refunded" ---------------------------------------------------------------------------


def test_place_bet_resent_after_refund_is_never_debited_again(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.refund(P.refund(7, 1))
    again = book.place_bets(P.place(P.entry(1)))
    assert again.placed == []
    assert again.unchanged == [1]
    assert balance(book, "u1") == (D("100.00"), D("0.00"))


def test_resent_refund_credits_once(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.refund(P.refund(7, 1))
    again = book.refund(P.refund(7, 1))
    assert again.closed == []
    assert again.unchanged == [1]
    assert balance(book, "u1") == (D("100.00"), D("0.00"))


def test_settle_of_refunded_bet_is_already_refunded(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.refund(P.refund(7, 1))
    with raises_key("bet.already_refunded") as info:
        book.settle(P.settle(7, (1, "5.00")))
    assert info.value.status == 409
    assert balance(book, "u1") == (D("100.00"), D("0.00"))


# --- row "settled" ----------------------------------------------------------------------------


def test_place_bet_resent_after_settle_is_never_debited_again(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, "0.00")))
    again = book.place_bets(P.place(P.entry(1)))
    assert again.unchanged == [1]
    assert balance(book, "u1") == (D("89.00"), D("0.00"))


def test_refund_of_settled_bet_is_already_settled(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, "3.00")))
    with raises_key("bet.already_settled") as info:
        book.refund(P.refund(7, 1))
    assert info.value.status == 409
    assert balance(book, "u1") == (D("92.00"), D("0.00"))


def test_resent_settle_pays_once(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, "25.00")))
    again = book.settle(P.settle(7, (1, "25.00")))
    assert again.closed == []
    assert again.unchanged == [1]
    # The same amount written differently is the same payout.
    book.settle(P.settle(7, (1, "25")))
    assert balance(book, "u1") == (D("114.00"), D("0.00"))


def test_settle_resent_with_other_payout_is_a_conflict(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, "25.00")))
    with raises_key("bet.conflict"):
        book.settle(P.settle(7, (1, "26.00")))
    with raises_key("bet.conflict"):
        book.settle(P.settle(7, (1, "0")))
    assert balance(book, "u1") == (D("114.00"), D("0.00"))


# --- zero payouts ----------------------------------------------------------------------------


@pytest.mark.parametrize("zero", ["0", "0.00", D(0), 0])
def test_zero_payout_credits_nothing(book: ledger.Ledger, zero: Any) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, zero)))
    assert balance(book, "u1") == (D("89.00"), D("0.00"))
    assert house(book, "house:prizes") == 0
    view = book.bet(1)
    assert view is not None
    assert view.state == "settled"
    assert view.payout == 0
    # Re-sent with another spelling of zero: still nothing, still 200.
    assert book.settle(P.settle(7, (1, "0.0"))).unchanged == [1]


def test_settle_pays_winners_and_credits_nothing_to_losers(book: ledger.Ledger) -> None:
    funded(book)
    funded(book, user="u2")
    book.place_bets(P.place(P.entry(1), P.entry(2, user="u2")))
    book.settle(P.settle(7, (1, "20.00", "u1"), (2, "0.00", "u2")))
    assert balance(book, "u1") == (D("109.00"), D("0.00"))
    assert balance(book, "u2") == (D("89.00"), D("0.00"))


# --- all-or-nothing ---------------------------------------------------------------------------


def test_place_bets_with_one_unaffordable_entry_places_nothing(book: ledger.Ledger) -> None:
    funded(book, "20.00")
    funded(book, "100.00", user="u2")
    body = P.place(
        P.entry(1, user="u2"), P.entry(2), P.entry(3), P.entry(4, user="u2")
    )  # u1 can afford one entry of 11.00, not two
    with raises_key("user.insufficient_funds"):
        book.place_bets(body)
    for uid in (1, 2, 3, 4):
        assert book.bet(uid) is None
    assert balance(book, "u1") == (D("20.00"), D("0.00"))
    assert balance(book, "u2") == (D("100.00"), D("0.00"))


def test_place_bets_with_one_conflicting_entry_places_nothing(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    with raises_key("bet.conflict"):
        book.place_bets(P.place(P.entry(2), P.entry(1, amount=D(5))))
    assert book.bet(2) is None
    assert balance(book, "u1") == (D("89.00"), D("11.00"))


def test_multi_pool_refund_with_one_unknown_bet_applies_nothing(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1, pool=7), P.entry(2, pool=8)))
    body = P.pools(
        P.pool_of(7, [P.participant(1)]),
        P.pool_of(8, [P.participant(2), P.participant(999)]),
    )
    with raises_key("bet.not_found"):
        book.refund(body)
    assert balance(book, "u1") == (D("78.00"), D("22.00"))
    for uid in (1, 2):
        view = book.bet(uid)
        assert view is not None
        assert view.state == "placed"


def test_multi_pool_settle_with_one_unknown_bet_applies_nothing(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1, pool=7), P.entry(2, pool=8)))
    body = P.pools(
        P.pool_of(7, [P.participant(1, payout="50.00")]),
        P.pool_of(8, [P.participant(2, payout="0"), P.participant(999, payout="1.00")]),
    )
    with raises_key("bet.not_found"):
        book.settle(body)
    assert balance(book, "u1") == (D("78.00"), D("22.00"))
    assert house(book, "house:prizes") == 0


def test_settle_with_one_refunded_bet_applies_nothing(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1), P.entry(2)))
    book.refund(P.refund(7, 2))
    with raises_key("bet.already_refunded"):
        book.settle(P.settle(7, (1, "10.00"), (2, "0")))
    view = book.bet(1)
    assert view is not None
    assert view.state == "placed"
    assert balance(book, "u1") == (D("89.00"), D("11.00"))


def test_resend_mixing_new_and_processed_bets_processes_only_the_new(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    mixed = book.place_bets(P.place(P.entry(1), P.entry(2)))
    assert mixed.placed == [2]
    assert mixed.unchanged == [1]
    assert balance(book, "u1") == (D("78.00"), D("22.00"))
    book.refund(P.refund(7, 1))
    refunds = book.refund(P.refund(7, 1, 2))
    assert refunds.closed == [2]
    assert refunds.unchanged == [1]
    assert balance(book, "u1") == (D("100.00"), D("0.00"))


def test_settle_resend_mixing_new_and_settled_bets_pays_only_the_new(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1), P.entry(2)))
    book.settle(P.settle(7, (1, "5.00")))
    result = book.settle(P.settle(7, (1, "5.00"), (2, "7.00")))
    assert result.closed == [2]
    assert result.unchanged == [1]
    assert balance(book, "u1") == (D("90.00"), D("0.00"))


def test_same_bet_twice_in_one_place_request_is_held_once(book: ledger.Ledger) -> None:
    funded(book)
    result = book.place_bets(P.place(P.entry(1), P.entry(1)))
    assert result.placed == [1]
    assert result.unchanged == [1]
    assert balance(book, "u1") == (D("89.00"), D("11.00"))
    with raises_key("bet.conflict"):
        book.place_bets(P.place(P.entry(2), P.entry(2, amount=D(3))))
    assert book.bet(2) is None


def test_same_bet_twice_in_one_settle_request_pays_once(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, "5.00"), (1, "5.00")))
    assert balance(book, "u1") == (D("94.00"), D("0.00"))


def test_tournament_refund_refunds_every_entry_once(book: ledger.Ledger) -> None:
    funded(book)
    funded(book, user="u2")
    book.place_bets(P.place(P.entry(1), P.entry(2, user="u2"), P.entry(3)))
    body = P.refund(7, (1, "u1"), (2, "u2"), (3, "u1"))
    assert sorted(book.refund(body).closed) == [1, 2, 3]
    assert sorted(book.refund(body).unchanged) == [1, 2, 3]
    assert balance(book, "u1") == (D("100.00"), D("0.00"))
    assert balance(book, "u2") == (D("100.00"), D("0.00"))


# --- paid, ticket and free entries ----------------------------------------------------------


def test_ticket_entry_is_funded_by_house_tickets(book: ledger.Ledger) -> None:
    book.place_bets(P.place(P.entry(1, user="poor", ticket="jwt.ticket.token")))
    assert balance(book, "poor") == (D("0.00"), D("11.00"))
    assert house(book, "house:tickets") == -1100
    view = book.bet(1)
    assert view is not None
    assert view.funding == "ticket"


def test_refunded_ticket_entry_returns_to_house_tickets(book: ledger.Ledger) -> None:
    book.place_bets(P.place(P.entry(1, user="poor", ticket="jwt.ticket.token")))
    book.refund(P.refund(7, (1, "poor")))
    # Nothing reaches the user's balance: the ticket paid, the ticket is paid back.
    assert balance(book, "poor") == (D("0.00"), D("0.00"))
    assert house(book, "house:tickets") == 0


def test_settled_ticket_entry_pays_the_user(book: ledger.Ledger) -> None:
    book.place_bets(P.place(P.entry(1, user="poor", ticket="jwt.ticket.token")))
    book.settle(P.settle(7, (1, "30.00", "poor")))
    assert balance(book, "poor") == (D("30.00"), D("0.00"))
    assert house(book, "house:entries") == 1000


def test_free_entry_posts_nothing_but_is_recorded(book: ledger.Ledger) -> None:
    before = book.check()
    result = book.place_bets(P.place(P.entry(1, user="newbie", amount=D("0.0"), rake=D("0.0"))))
    assert result.placed == [1]
    after = book.check()
    assert after.postings == before.postings
    assert after.bets == before.bets + 1
    view = book.bet(1)
    assert view is not None
    assert (view.funding, view.state) == ("free", "placed")
    assert book.balance("newbie") == []


def test_free_entry_refund_and_settle_move_no_stake(book: ledger.Ledger) -> None:
    free = [P.entry(uid, user="f", amount=0, rake=0) for uid in (1, 2)]
    book.place_bets(P.place(*free))
    book.refund(P.refund(7, (1, "f")))
    book.settle(P.settle(7, (2, "12.00", "f")))
    assert balance(book, "f") == (D("12.00"), D("0.00"))
    assert house(book, "house:entries") == 0


def test_zero_cost_ticket_entry_posts_nothing(book: ledger.Ledger) -> None:
    before = book.check().postings
    book.place_bets(P.place(P.entry(1, user="t", amount=0, rake=0, ticket="jwt")))
    assert book.check().postings == before
    view = book.bet(1)
    assert view is not None
    assert view.funding == "ticket"


# --- multi-currency ------------------------------------------------------------------------------


def test_bets_are_held_in_the_bet_currency(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="eur")
    book.deposit("u1", "JPY", "5000", reference="jpy")
    book.place_bets(
        P.place(
            P.entry(1, currency="EUR"),
            P.entry(2, currency="JPY", amount=1000, rake=100),
        )
    )
    assert balance(book, "u1", "EUR") == (D("89.00"), D("11.00"))
    assert balance(book, "u1", "JPY") == (D("3900"), D("1100"))
    book.settle(P.settle(7, (2, "2500"), currency="JPY"))
    book.refund(P.refund(7, 1))
    assert [b.to_dict() for b in book.balance("u1")] == [
        {"currency": "EUR", "available": "100.00", "held": "0.00"},
        {"currency": "JPY", "available": "6400", "held": "0"},
    ]


def test_jpy_amount_finer_than_a_yen_is_refused(book: ledger.Ledger) -> None:
    book.deposit("u1", "JPY", "5000", reference="jpy")
    with raises_key("amount.invalid"):
        book.place_bets(P.place(P.entry(1, currency="JPY", amount=D("1.5"), rake=0)))
    assert book.bet(1) is None


# --- deposits and withdrawals ------------------------------------------------------------------


def test_resent_deposit_credits_once(book: ledger.Ledger) -> None:
    first = book.deposit("u1", "EUR", "50.00", reference="r1")
    again = book.deposit("u1", "EUR", D("50"), reference="r1")
    assert first.applied
    assert not again.applied
    assert balance(book, "u1") == (D("50.00"), D("0.00"))
    assert house(book, "house:cash") == -5000


@pytest.mark.parametrize(
    ("user", "currency", "amount"),
    [("u2", "EUR", "50.00"), ("u1", "USD", "50.00"), ("u1", "EUR", "50.01")],
    ids=["user", "currency", "amount"],
)
def test_deposit_reference_reused_differently_is_a_conflict(
    book: ledger.Ledger, user: str, currency: str, amount: str
) -> None:
    book.deposit("u1", "EUR", "50.00", reference="r1")
    with raises_key("reference.conflict") as info:
        book.deposit(user, currency, amount, reference="r1")
    assert info.value.status == 409
    assert balance(book, "u1") == (D("50.00"), D("0.00"))


def test_resent_withdrawal_debits_once(book: ledger.Ledger) -> None:
    funded(book)
    assert book.withdraw("u1", "EUR", "30", reference="w1").applied
    assert not book.withdraw("u1", "EUR", "30.00", reference="w1").applied
    assert balance(book, "u1") == (D("70.00"), D("0.00"))
    with raises_key("reference.conflict"):
        book.withdraw("u1", "EUR", "31", reference="w1")


def test_withdrawal_overdraft_is_refused(book: ledger.Ledger) -> None:
    funded(book, "10.00")
    book.place_bets(P.place(P.entry(1, amount=D(5), rake=0)))
    # Held money is not available: only 5.00 may leave.
    with raises_key("user.insufficient_funds"):
        book.withdraw("u1", "EUR", "5.01", reference="w1")
    assert balance(book, "u1") == (D("5.00"), D("5.00"))
    book.withdraw("u1", "EUR", "5.00", reference="w2")
    assert balance(book, "u1") == (D("0.00"), D("5.00"))


@pytest.mark.parametrize("amount", ["0", "0.00", "-1", "NaN", "1.001"])
def test_deposit_of_a_non_positive_or_bad_amount_is_refused(
    book: ledger.Ledger, amount: str
) -> None:
    with raises_key("amount.invalid"):
        book.deposit("u1", "EUR", amount, reference="r")
    assert book.balance("u1") == []


# --- reads -----------------------------------------------------------------------------------


def test_statement_lists_the_users_movements_newest_first(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    book.settle(P.settle(7, (1, "4.00")))
    lines = book.statement("u1")
    kinds = [(line.kind, line.account, line.amount) for line in lines]
    assert kinds == [
        ("settle", "available", D("4.00")),
        ("settle", "held", D("-11.00")),
        ("hold", "held", D("11.00")),
        ("hold", "available", D("-11.00")),
        ("deposit", "available", D("100.00")),
    ]
    assert [line.id for line in lines] == sorted((line.id for line in lines), reverse=True)
    assert lines[-1].reference == "seed-u1"
    assert lines[0].bet_uid == 1
    page = book.statement("u1", limit=2, before=lines[1].id)
    assert [line.id for line in page] == [lines[2].id, lines[3].id]  # pages continue in order
    stamp = datetime.fromisoformat(lines[0].to_dict()["created_at"])
    assert stamp.tzinfo is not None
    assert abs(stamp - datetime.now(UTC)).total_seconds() < 600
    assert book.statement("u1", "JPY") == []


def test_pool_report_sums_stakes_rake_payouts_and_open_holds(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1), P.entry(2), P.entry(3), P.entry(4, pool=8)))
    book.settle(P.settle(7, (1, "15.00")))
    book.refund(P.refund(7, 2))
    report = book.pool_report(7).to_dict()
    assert report == {
        "pool_uid": 7,
        "currencies": [
            {
                "currency": "EUR",
                "entries": 3,
                "by_state": {"placed": 1, "refunded": 1, "settled": 1},
                "stakes": "30.00",
                "rake": "3.00",
                "payouts": {"EUR": "15.00"},
                "open_holds": "11.00",
            }
        ],
    }
    assert book.pool_report(99).currencies == []


def test_pool_report_keeps_payouts_in_the_currency_they_were_paid_in(
    book: ledger.Ledger,
) -> None:
    # EUR entries paid out in JPY (scale 0) and in EUR: never added together.
    funded(book)
    book.place_bets(P.place(P.entry(1), P.entry(2), P.entry(3)))
    book.settle(P.settle(7, (1, "500"), currency="JPY"))
    book.settle(P.settle(7, (2, "15.00"), (3, "0")))
    (eur,) = book.pool_report(7).to_dict()["currencies"]
    assert eur["currency"] == "EUR"
    assert eur["by_state"] == {"settled": 3}
    assert (eur["stakes"], eur["rake"]) == ("30.00", "3.00")
    assert eur["payouts"] == {"EUR": "15.00", "JPY": "500"}
    assert balance(book, "u1", "JPY") == (D("500"), D("0"))


def test_bet_view_of_unknown_bet_is_none(book: ledger.Ledger) -> None:
    assert book.bet(12345) is None


def test_check_counts_the_journal(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    report = book.check()
    assert report.ok
    assert (report.transactions, report.postings, report.bets) == (2, 4, 1)
    assert report.accounts == 3  # house:cash, user:u1, user:u1:held


# --- the database's own guards ---------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE postings SET amount = amount + 1",
        "DELETE FROM postings",
        "UPDATE transactions SET kind = 'deposit'",
        "DELETE FROM transactions",
    ],
)
def test_journal_rows_cannot_be_updated_or_deleted(book: ledger.Ledger, statement: str) -> None:
    funded(book)
    with pytest.raises(DBAPIError, match="append-only"):
        execute_raw(book, statement)
    assert balance(book, "u1") == (D("100.00"), D("0.00"))


def test_unbalanced_transaction_is_refused_at_commit(book: ledger.Ledger) -> None:
    funded(book)
    forged = (
        "INSERT INTO postings (txn_id, account, currency, amount) "
        "VALUES (900001, 'user:u1', 'EUR', 500), (900001, 'house:cash', 'EUR', -499)",
        "INSERT INTO transactions (id, idempotency_key, kind, created_at) "
        "VALUES (900001, 'forged', 'deposit', CURRENT_TIMESTAMP)",
    )
    with pytest.raises(DBAPIError, match="unbalanced"):
        execute_raw(book, *forged)
    assert book.check().transactions == 1


def test_posting_without_its_transaction_is_refused_at_commit(book: ledger.Ledger) -> None:
    funded(book)
    orphan = (
        "INSERT INTO postings (txn_id, account, currency, amount) "
        "VALUES (900002, 'user:u1', 'EUR', 500), (900002, 'house:cash', 'EUR', -500)"
    )
    with pytest.raises(DBAPIError):
        execute_raw(book, orphan)
    assert book.check().postings == 2


def test_duplicate_bet_uid_is_refused_by_the_unique_key(book: ledger.Ledger) -> None:
    book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    duplicate = (
        "INSERT INTO bets (uid, user_uid, pool_uid, currency, amount, rake, funding,"
        " state, secrets, placed_at) VALUES (1, 'u9', 7, 'EUR', 0, 0, 'free',"
        " 'placed', '{}', CURRENT_TIMESTAMP)"
    )
    with pytest.raises(DBAPIError):
        execute_raw(book, duplicate)
    view = book.bet(1)
    assert view is not None
    assert view.user == "u1"


def test_duplicate_idempotency_key_is_refused_by_the_unique_key(book: ledger.Ledger) -> None:
    funded(book)
    duplicate = (
        "INSERT INTO transactions (id, idempotency_key, kind, created_at) "
        "VALUES (900003, 'movement:seed-u1', 'deposit', CURRENT_TIMESTAMP)"
    )
    with pytest.raises(DBAPIError):
        execute_raw(book, duplicate)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE bets SET state = 'refunded' WHERE uid = 2",  # settled: closed once
        "UPDATE bets SET state = 'settled', payout = 0 WHERE uid = 2",
        "UPDATE bets SET state = 'placed' WHERE uid = 2",
        "UPDATE bets SET amount = 1 WHERE uid = 1",  # placed: its terms never change
        "UPDATE bets SET user_uid = 'u9', state = 'refunded' WHERE uid = 1",
        "UPDATE bets SET uid = 3, state = 'refunded' WHERE uid = 1",
        "UPDATE bets SET state = 'placed' WHERE uid = 1",
    ],
)
def test_a_bet_is_closed_once_and_never_changed_otherwise_even_by_hand(
    book: ledger.Ledger, statement: str
) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1), P.entry(2)))
    book.settle(P.settle(7, (2, "0.00")))
    with pytest.raises(DBAPIError, match="closed once"):
        execute_raw(book, statement)
    first, second = book.bet(1), book.bet(2)
    assert first is not None
    assert second is not None
    assert (first.state, second.state) == ("placed", "settled")


def test_user_balance_cannot_go_negative_even_by_hand(book: ledger.Ledger) -> None:
    funded(book)
    with pytest.raises(DBAPIError, match="accounts_no_overdraft"):
        execute_raw(book, "UPDATE accounts SET balance = -1 WHERE name = 'user:u1'")


# --- a failure in the middle of a unit of work -------------------------------------------------


def test_failure_mid_unit_of_work_writes_nothing(book: ledger.Ledger) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    broken = ledger.Ledger(FailingStore(book.store))
    with pytest.raises(RuntimeError, match="injected"):
        broken.place_bets(P.place(P.entry(2)))
    with pytest.raises(RuntimeError, match="injected"):
        broken.settle(P.settle(7, (1, "9.00")))
    with pytest.raises(RuntimeError, match="injected"):
        broken.deposit("u1", "EUR", "5", reference="lost")
    assert book.bet(2) is None
    view = book.bet(1)
    assert view is not None
    assert view.state == "placed"
    assert balance(book, "u1") == (D("89.00"), D("11.00"))
    # The same requests succeed afterwards, exactly once.
    assert book.place_bets(P.place(P.entry(2))).placed == [2]
    assert book.settle(P.settle(7, (1, "9.00"))).closed == [1]
    assert balance(book, "u1") == (D("87.00"), D("11.00"))


def test_open_ledger_on_unmigrated_postgres_says_the_schema_is_not_ready(
    postgres_url: str,
) -> None:
    with pytest.raises(ledger.SchemaNotReady) as info:
        ledger.open_ledger(postgres_url)
    assert info.value.status == 503


# --- one namespace of movement references; what a refund or settle says is compared ------------


def test_a_deposit_reference_cannot_be_reused_by_a_withdrawal(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "10.00", reference="ref-1")
    with raises_key("reference.conflict"):
        book.withdraw("u1", "EUR", "10.00", reference="ref-1")
    assert balance(book, "u1") == (Decimal("10.00"), Decimal("0.00"))
    # The same movement again is still a replay, applied once.
    assert book.deposit("u1", "EUR", "10.00", reference="ref-1").applied is False
    assert book.check().ok


def test_disagreeing_refund_amounts_and_echoed_secrets_are_logged_with_the_bet_uid(
    book: ledger.Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    funded(book)
    book.place_bets(P.place(P.entry(1)))
    refund = P.refund(7, 1)
    refund["pools"][0]["bets"][0]["bet"].update(
        {"amount": "9.00", "rake": "1.00", "secrets": {"ledger_ref": "not-ours"}}
    )
    with caplog.at_level("WARNING", logger="ledger.writer"):
        book.refund(refund)
    notes = [record.getMessage() for record in caplog.records if record.name == "ledger.writer"]
    assert notes == [
        "bet 1: the secrets echoed differ from those returned at placement",
        "bet 1: the refund's amount 9.00 differs from the recorded 10.00 EUR",
    ]
    # Logged, never used: the refund returned exactly what was held.
    assert balance(book, "u1") == (Decimal("100.00"), Decimal("0.00"))


def test_settle_echoing_the_placement_secrets_logs_nothing(
    book: ledger.Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    funded(book)
    secrets = book.place_bets(P.place(P.entry(1))).secrets
    settle = P.settle(7, (1, "5.00"))
    settle["pools"][0]["bets"][0]["bet"]["secrets"] = secrets
    with caplog.at_level("WARNING", logger="ledger.writer"):
        book.settle(settle)
    assert not [record for record in caplog.records if record.name == "ledger.writer"]
