"""Migration 0023 chains the history an existing database holds: a database built at revision
0020 with deposits and bets, then upgraded, verifies; its history is one record that later
commits follow, and a change to a row of that history is named at it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import ledger
from ledger.stores.integrity import JournalIntegrity
from ledger.stores.migrations import upgrade
from ledger.stores.postgres import normalize_url
from ledger.stores.schema import bets, open_bets
from ledger.stores.sqlite import SqliteStore
from support import payloads as P

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database at revision 0020 holding a deposit and two free bets, one of them closed."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/old.db"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    # On SQLite, the store's own engine: the balancing trigger adds with ledger_sum.
    sqlite = url.startswith("sqlite")
    engine = SqliteStore(url, migrate=False).engine if sqlite else create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            upgrade(connection, "0020")

            if not sqlite:
                # As the store does: the postings' transaction is checked at commit.
                connection.execute(text("SET CONSTRAINTS ALL DEFERRED"))

            # Postings first, then the transaction row that seals them.
            connection.execute(
                text(
                    "INSERT INTO postings (txn_id, account, currency, amount, balance_after) "
                    "VALUES (1, 'house:cash', 'EUR', -5000, -5000), "
                    "(1, 'user:u1', 'EUR', 5000, 5000)"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO transactions (id, idempotency_key, kind, user_uid, reference, "
                    "created_at) VALUES (1, 'deposit:h1', 'deposit', 'u1', 'h1', :at)"
                ),
                {"at": AT.strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite else AT},
            )
            if not sqlite:
                connection.execute(text("SELECT setval('transaction_ids', 1)"))
            connection.execute(
                text(
                    "INSERT INTO accounts (name, currency, kind, balance) VALUES "
                    "('house:cash', 'EUR', 'house', -5000), ('user:u1', 'EUR', 'available', 5000)"
                )
            )
            row = {
                "user_uid": "u1",
                "pool_uid": 7,
                "currency": "EUR",
                "amount": 0,
                "rake": 0,
                "funding": "free",
                "payout": None,
                "payout_currency": None,
                "ticket": None,
                "request_uuid": None,
                "secrets": {},
                "placed_at": AT,
            }
            connection.execute(
                bets.insert(),
                [
                    {**row, "uid": 1, "state": "placed", "closed_at": None},
                    {**row, "uid": 2, "state": "refunded", "closed_at": AT},
                ],
            )
            connection.execute(open_bets.insert(), [{"uid": 1, "placed_at": AT}])
    finally:
        engine.dispose()
    return url


def test_an_upgraded_database_chains_its_history_and_what_follows_verifies(old_url: str) -> None:
    with ledger.open_ledger(old_url, migrate=True) as book:
        assert book.check().ok, book.check().problems
        journal = JournalIntegrity(book.store)
        assert journal.verify().ok
        assert journal.head()[0] == 1
        book.deposit("u1", "EUR", "1.00", "after")
        book.refund(P.refund(7, 1))  # a bet of the history, closed by a new commit
        report = journal.verify()
        assert (report.ok, report.problem, report.size) == (True, None, 3)


def test_a_row_of_the_history_changed_is_named_at_the_first_commit(old_url: str) -> None:
    with ledger.open_ledger(old_url, migrate=True) as book:
        book.deposit("u1", "EUR", "1.00", "after")
        engine = create_engine(normalize_url(old_url))
        try:
            with engine.begin() as connection:
                if old_url.startswith("sqlite"):
                    connection.execute(text("DROP TRIGGER bets_close_once"))
                else:
                    connection.execute(text("SET LOCAL session_replication_role = replica"))
                connection.execute(text("UPDATE bets SET state = 'settled' WHERE uid = 2"))
        finally:
            engine.dispose()
        report = JournalIntegrity(book.store).verify()
        assert (report.ok, report.seq) == (False, 1)
        assert report.problem is not None
        assert "commit 1:" in report.problem
