"""SQLite: a huge close's commit leaves the copy of its log into the database to a thread of its
own (ledger.stores.sqlite.Checkpointer), and every connection copies at commit again after.

A settle of a million participants writes hundreds of megabytes of log; the automatic
checkpoint copied them into the database inside the commit, before the platform had its answer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

import ledger
from ledger import writer
from ledger.errors import StoreUnavailable
from ledger.stores import closing
from ledger.stores.sql import SqlUnitOfWork
from ledger.stores.sqlite import AUTOCHECKPOINT_PAGES, SqliteStore
from support import payloads as P


@pytest.fixture
def book(tmp_path: Path) -> Iterator[ledger.Ledger]:
    with ledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        yield opened


def _commits(book: ledger.Ledger) -> list[tuple[Any, int]]:
    """Each commit's DBAPI connection and its automatic checkpoint setting as it commits."""
    seen: list[tuple[Any, int]] = []
    store = book.store
    assert isinstance(store, SqliteStore)

    @event.listens_for(store.engine, "commit")
    def before_commit(connection: Any) -> None:
        driver = connection.connection.driver_connection
        seen.append((driver, driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0]))

    return seen


def _placed(book: ledger.Ledger, count: int) -> None:
    book.deposit("u1", "EUR", "1000.00", reference="seed")
    book.place_bets(P.place(*(P.entry(uid) for uid in range(1, count + 1))))


def _autocheckpoint(driver: sqlite3.Connection) -> int:
    return int(driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_a_huge_close_commits_without_copying_its_log_and_a_thread_copies_it_after(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(writer, "SET_BASED_FROM", 4)
    _placed(book, 4)
    commits = _commits(book)
    book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    [(driver, during)] = commits
    assert during == 0
    # The connection went back to the pool copying at commit again.
    assert _autocheckpoint(driver) == AUTOCHECKPOINT_PAGES
    store = book.store
    assert isinstance(store, SqliteStore)
    store._checkpointer.join(10)
    # Every frame of the log is in the database: nothing left for a later commit to copy.
    with sqlite3.connect(tmp_path / "ledger.db") as database:
        busy, frames, copied = database.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert (busy, copied) == (0, frames)
    # A small write commits as it always did.
    commits.clear()
    book.deposit("u1", "EUR", "1.00", reference="after")
    assert [setting for _, setting in commits] == [AUTOCHECKPOINT_PAGES]
    assert book.check().ok


def test_a_huge_close_whose_commit_fails_leaves_its_connection_copying_again(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "SET_BASED_FROM", 4)
    _placed(book, 4)
    requested: list[bool] = []
    store = book.store
    assert isinstance(store, SqliteStore)
    monkeypatch.setattr(store._checkpointer, "request", lambda: requested.append(True))
    used: list[sqlite3.Connection] = []
    write = closing.write

    def recorded(connection: Any, *args: Any, **kwargs: Any) -> Any:
        used.append(connection.connection.driver_connection)
        assert _autocheckpoint(used[0]) == 0  # deferred before the close writes
        return write(connection, *args, **kwargs)

    def failing_commit(self: SqlUnitOfWork) -> None:
        raise RuntimeError("injected: the commit failed")

    monkeypatch.setattr(closing, "write", recorded)
    monkeypatch.setattr(SqlUnitOfWork, "commit", failing_commit)
    with pytest.raises(StoreUnavailable):  # the group commit failed: the platform re-sends
        book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    # Rolled back, and back in the pool copying at commit: no log of its own to copy later.
    assert _autocheckpoint(used[0]) == AUTOCHECKPOINT_PAGES
    assert requested == []
    monkeypatch.undo()
    view = book.bet(1)
    assert view is not None
    assert view.state == "placed"


def test_a_small_close_commits_as_every_write_does(
    book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "SET_BASED_FROM", 5)
    _placed(book, 4)
    commits = _commits(book)
    book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    assert [setting for _, setting in commits] == [AUTOCHECKPOINT_PAGES]
