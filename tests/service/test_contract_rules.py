"""The contract's uid and currency rules hold through the library, on every store: a user uid that
would name another user's held account, or a currency code with a trailing newline, is refused
with 400 before anything is written."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

import ledger
from support import payloads as P
from support.books import balance, raises_key


@pytest.mark.parametrize("road", ["place_bets", "deposit"])
def test_a_uid_ending_in_held_after_a_newline_cannot_reach_another_users_hold(
    book: ledger.Ledger, road: str
) -> None:
    book.deposit("a\nb", "EUR", "100.00", reference="seed")
    book.place_bets(P.place(P.entry(1, user="a\nb")))
    before = book.check()

    # "user:a\nb:held" is the held account of user "a\nb".
    with raises_key("request.invalid"):
        if road == "place_bets":
            book.place_bets(P.place(P.entry(2, user="a\nb:held", amount=D(5), rake=D(0))))
        else:
            book.deposit("a\nb:held", "EUR", "5.00", reference="evil")

    after = book.check()
    assert after.ok, after.problems
    assert (after.transactions, after.postings, after.bets) == (
        before.transactions,
        before.postings,
        before.bets,
    )
    assert balance(book, "a\nb") == (D("89.00"), D("11.00"))


def test_a_currency_code_with_a_trailing_newline_is_refused(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "100.00", reference="seed")

    with raises_key("request.invalid"):
        book.place_bets(P.place(P.entry(1, currency="EUR\n", amount=D(0), rake=D(0))))

    assert book.bet(1) is None
    assert [row.currency for row in book.balance("u1")] == ["EUR"]
