"""The database's own guards, on every store: what even a statement by hand cannot do to the
journal, and a unit of work that fails midway writing nothing.

Each test runs once on SQLite and once on Postgres (the ``book`` fixture), and ends with ``check()``
clean (the ``books_stay_balanced`` fixture).
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy.exc import DBAPIError

import ledger
from support import payloads as P
from support.books import FailingStore, balance, execute_raw, funded

D = Decimal

pytestmark = pytest.mark.usefixtures("books_stay_balanced")


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
