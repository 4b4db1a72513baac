"""Each bet names the commit that closed it (``bets.closed_grp``): written by every close, filled
by migration 0024 for the bets closed before it, and read by a bet's proof."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, select, text
from sqlalchemy.exc import DBAPIError

import ledger
from ledger.stores.integrity import JournalIntegrity
from ledger.stores.migrations import upgrade
from ledger.stores.postgres import normalize_url
from ledger.stores.schema import bets, open_bets
from ledger.stores.sqlite import SqliteStore
from support import payloads as P

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _engine(url: str) -> Engine:
    # On SQLite, the store's own engine: its guards call the store's functions.
    if url.startswith("sqlite"):
        return SqliteStore(url, migrate=False).engine
    return create_engine(normalize_url(url))


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/book.db"
    return str(request.getfixturevalue("postgres_url"))


def test_migration_0024_names_the_commit_that_closed_each_bet_and_keeps_the_close_once_guard(
    url: str,
) -> None:
    engine = _engine(url)
    try:
        with engine.begin() as connection:
            upgrade(connection, "0023")
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
                    {**row, "uid": 1, "state": "placed", "closed_at": None, "placed_grp": 4},
                    {**row, "uid": 2, "state": "refunded", "closed_at": AT, "placed_grp": 4},
                ],
            )
            connection.execute(open_bets.insert(), [{"uid": 1, "placed_at": AT}])
            connection.execute(text("INSERT INTO bet_closes (grp, uid) VALUES (9, 2)"))
        with engine.begin() as connection:
            upgrade(connection)
        with engine.connect() as connection:
            named = dict(connection.execute(select(bets.c.uid, bets.c.closed_grp)).all())
        assert named == {1: None, 2: 9}
        with pytest.raises(DBAPIError, match="closed once"), engine.begin() as connection:
            connection.execute(text("UPDATE bets SET payout = 1 WHERE uid = 2"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("participants", [3, 1_200])
def test_every_close_names_its_commit_on_the_bet_as_bet_closes_does(
    url: str, participants: int
) -> None:
    """Bet by bet (a few) and set-based (at least 1,000: ledger.commands.closes)."""
    with ledger.open_ledger(url, migrate=True) as book:
        uids = range(1, participants + 1)
        book.place_bets(P.place(*(P.entry(uid, f"u{uid}", ticket="t") for uid in uids)))
        book.settle(P.settle(7, *((uid, "0.00", f"u{uid}") for uid in uids)))
        engine = _engine(url)
        try:
            with engine.connect() as connection:
                named = dict(connection.execute(select(bets.c.uid, bets.c.closed_grp)).all())
                closes: dict[int, int] = dict(
                    connection.execute(text("SELECT uid, grp FROM bet_closes")).all()
                )
        finally:
            engine.dispose()
    assert named == closes
    assert len(named) == participants
    assert None not in named.values()


def test_a_bet_naming_another_closing_commit_fails_verify(url: str) -> None:
    with ledger.open_ledger(url, migrate=True) as book:
        book.place_bets(P.place(P.entry(1, ticket="t"), P.entry(2, ticket="t")))
        book.settle(P.settle(7, (1, "0.00")))
        book.settle(P.settle(7, (2, "0.00")))
        assert JournalIntegrity(book.store).verify().ok
        engine = _engine(url)
        try:
            with engine.begin() as connection:
                if url.startswith("sqlite"):
                    connection.execute(text("DROP TRIGGER bets_close_once"))
                else:
                    connection.execute(text("SET LOCAL session_replication_role = replica"))
                connection.execute(
                    text(
                        "UPDATE bets SET closed_grp = (SELECT closed_grp FROM bets WHERE uid = 2)"
                        " WHERE uid = 1"
                    )
                )
        finally:
            engine.dispose()
        report = JournalIntegrity(book.store).verify()
    assert not report.ok
    assert report.problem is not None
    assert "1 bet(s) name a closing commit" in report.problem
