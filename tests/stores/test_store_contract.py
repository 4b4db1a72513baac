"""The store contract suite: every rule of DESIGN sections 4 and 5 on a bet's life, on every store
(money beside the bets: test_store_contract_money; the database's guards: test_store_guards).

Each test runs once on SQLite and once on Postgres (the ``book`` fixture), and ends with ``check()``
clean (the ``books_stay_balanced`` fixture).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import ledger
from support import payloads as P
from support.books import balance, funded, house, raises_key

D = Decimal


pytestmark = pytest.mark.usefixtures("books_stay_balanced")


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
