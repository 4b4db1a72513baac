"""``ledger check`` proves every running balance: a journal changed by hand, past its guards,
fails it.

Each test runs once on SQLite and once on Postgres (the ``book`` fixture).
"""

from __future__ import annotations

from sqlalchemy import create_engine, text

import ledger
from ledger.stores.postgres import normalize_url
from support import payloads as P
from support.books import settled_and_refunded


def tamper(store_url: str, sql: str) -> None:
    """Change the journal by hand, past its append-only guard (as only an intruder could)."""
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.begin() as connection:
            if store_url.startswith("sqlite"):
                connection.execute(text("DROP TRIGGER postings_append_only_update"))
                connection.execute(text(sql))
            else:
                connection.execute(text("ALTER TABLE postings DISABLE TRIGGER USER"))
                connection.execute(text(sql))
                connection.execute(text("ALTER TABLE postings ENABLE TRIGGER USER"))
    finally:
        engine.dispose()


def test_check_fails_on_a_running_balance_changed_by_hand(
    book: ledger.Ledger, store_url: str
) -> None:
    settled_and_refunded(book)
    assert book.check().ok
    tamper(
        store_url,
        "UPDATE postings SET balance_after = 99 WHERE id = "
        "(SELECT min(id) FROM postings WHERE account = 'user:u1:held')",
    )
    problems = book.check().problems
    assert len(problems) == 1, problems
    assert "says the balance after it is 99, but the postings up to it sum to 1100" in problems[0]


def test_check_fails_when_the_last_running_balance_is_not_the_accounts(
    book: ledger.Ledger, store_url: str
) -> None:
    settled_and_refunded(book)
    tamper(
        store_url,
        "UPDATE postings SET balance_after = NULL WHERE id = "
        "(SELECT max(id) FROM postings WHERE account = 'user:u1')",
    )
    problems = book.check().problems
    assert any("says the balance after it is None" in problem for problem in problems), problems
    assert any(
        "account user:u1 EUR has balance 9300 but its last posting says None" in problem
        for problem in problems
    ), problems


def test_check_fails_when_the_open_holds_are_not_the_placed_bets(
    book: ledger.Ledger, store_url: str
) -> None:
    book.deposit("u1", "EUR", "100.00", reference="a")
    book.place_bets(P.place(P.entry(1, pool=7), P.entry(2, pool=7), P.entry(3, pool=8)))
    book.settle(P.settle(8, (3, "0")))
    assert book.check().ok
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM open_bets WHERE uid = 1"))
            connection.execute(
                text(
                    "INSERT INTO open_bets (uid, placed_at) SELECT uid, placed_at FROM bets "
                    "WHERE uid = 3"
                )
            )
    finally:
        engine.dispose()
    problems = book.check().problems
    assert problems == [
        "bet 1 is placed but not among the open holds (open_bets)",
        "open hold 3 in open_bets does not match its bet (bet is settled)",
    ], problems
