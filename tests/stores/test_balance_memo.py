"""Balances a unit of work has read or written are not read again where no other writer can
change them before commit (SQLite's one writer; on Postgres, the accounts it has locked): what
it remembers must always be what the database holds, and the checks stay the database's.

On every store (the ``book`` fixture).
"""

from __future__ import annotations

from decimal import Decimal as D

import pytest

import ledger
from ledger.domain import deposit, held_account, withdrawal
from ledger.stores.sql import SqlStore, SqlUnitOfWork
from support import payloads as P
from support.books import balance


def _store(book: ledger.Ledger) -> SqlStore:
    store = book.store
    assert isinstance(store, SqlStore)
    return store


def test_a_debit_after_a_credit_in_one_unit_of_work_sees_the_credited_balance(
    book: ledger.Ledger,
) -> None:
    book.deposit("u1", "EUR", "50.00", reference="seed")
    with _store(book).unit_of_work() as uow:
        assert uow.account_balances([("user:u1", "EUR")]) == {("user:u1", "EUR"): 5000}
        uow.post([deposit("u1", "EUR", 10000, "more")])
        # 120.00 of 150.00: refused if the debit went by the 50.00 read before the credit.
        uow.post([withdrawal("u1", "EUR", 12000, "out")])
        assert uow.account_balances([("user:u1", "EUR")]) == {("user:u1", "EUR"): 3000}
        uow.commit()
    assert balance(book, "u1") == (D("30.00"), D("0.00"))
    assert book.check().ok


def test_an_overdraft_is_still_refused_after_the_balance_was_read(book: ledger.Ledger) -> None:
    book.deposit("u1", "EUR", "50.00", reference="seed")
    with _store(book).unit_of_work() as uow:
        assert uow.account_balances([("user:u1", "EUR")]) == {("user:u1", "EUR"): 5000}
        with pytest.raises(ledger.InsufficientFunds):
            uow.post([withdrawal("u1", "EUR", 5001, "out")])
    assert balance(book, "u1") == (D("50.00"), D("0.00"))
    assert book.check().ok


def test_a_rolled_back_savepoint_takes_what_it_wrote_out_of_what_the_unit_remembers(
    book: ledger.Ledger,
) -> None:
    book.deposit("u1", "EUR", "50.00", reference="seed")
    with _store(book).unit_of_work() as uow:
        undone = _Undone()
        with pytest.raises(_Undone):
            _deposit_then_fail(uow, undone)
        assert uow.account_balances([("user:u1", "EUR")]) == {("user:u1", "EUR"): 5000}
        # Only the 50.00 that is really there: 60.00 must be refused, 40.00 leaves 10.00.
        with pytest.raises(ledger.InsufficientFunds), uow.savepoint():
            uow.post([withdrawal("u1", "EUR", 6000, "too much")])
        uow.post([withdrawal("u1", "EUR", 4000, "out")])
        uow.commit()
    assert balance(book, "u1") == (D("10.00"), D("0.00"))
    assert book.check().ok  # the postings' running balances included


class _Undone(Exception):
    pass


def _deposit_then_fail(uow: SqlUnitOfWork, error: Exception) -> None:
    with uow.savepoint():
        uow.post([deposit("u1", "EUR", 10000, "undone")])
        assert uow.account_balances([("user:u1", "EUR")]) == {("user:u1", "EUR"): 15000}
        raise error


def test_an_account_read_as_missing_is_created_by_its_first_credit(book: ledger.Ledger) -> None:
    with _store(book).unit_of_work() as uow:
        assert uow.account_balances([("user:u9", "EUR")]) == {}
        uow.post([deposit("u9", "EUR", 700, "first")])
        assert uow.account_balances([("user:u9", "EUR")]) == {("user:u9", "EUR"): 700}
        uow.post([withdrawal("u9", "EUR", 200, "out")])
        uow.commit()
    assert balance(book, "u9") == (D("5.00"), D("0.00"))
    assert book.check().ok


def test_a_decisions_read_gives_its_bets_and_both_sides_and_the_writes_start_from_them(
    book: ledger.Ledger,
) -> None:
    book.deposit("u1", "EUR", "50.00", reference="seed")
    book.place_bets(P.place(P.entry(1)))  # 11.00 held of 50.00
    user, held = ("user:u1", "EUR"), (held_account("u1"), "EUR")
    with _store(book).unit_of_work() as uow:
        known, balances = uow.bets_and_balances([2, 1], {user}, {held, ("user:u9:held", "EUR")})
        assert list(known) == [1]
        assert balances == {user: 3900, held: 1100}
        # Written without reading them again (on Postgres: under the lock taken by the read).
        uow.post([withdrawal("u1", "EUR", 3900, "all of it")])
        with pytest.raises(ledger.InsufficientFunds), uow.savepoint():
            uow.post([withdrawal("u1", "EUR", 1, "one cent more")])
        uow.commit()
    assert balance(book, "u1") == (D("0.00"), D("11.00"))
    assert book.check().ok  # the postings' running balances included
