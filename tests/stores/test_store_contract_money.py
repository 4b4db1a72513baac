"""The store contract suite, money beside the bets: paid, ticket and free entries, currencies,
deposits and withdrawals and their references, the reads; on every store.

Each test runs once on SQLite and once on Postgres (the ``book`` fixture), and ends with ``check()``
clean (the ``books_stay_balanced`` fixture).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

import ledger
from support import payloads as P
from support.books import balance, funded, house, raises_key

D = Decimal

pytestmark = pytest.mark.usefixtures("books_stay_balanced")


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
