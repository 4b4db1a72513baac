"""SQLite: the copy of the log into the database (a checkpoint) is a thread's work
(ledger.stores.sqlite.Checkpointer), not a commit's.

Every write's commit asks the checkpointer, which copies beside the writers at most once an
interval, and the first commit after a pass copies what was written meanwhile so that the log
starts over. A commit's own automatic checkpoint is a backstop far beyond SQLite's default
(which copied the same hot pages every eighth group commit under benchmark (a)). A huge close
commits with even the backstop off: a settle of a million participants writes hundreds of
megabytes of log, which the automatic checkpoint copied inside the commit, before the platform
had its answer.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

import ledger
from ledger.commands import closes
from ledger.errors import StoreUnavailable
from ledger.stores import closing
from ledger.stores.sql import SqlUnitOfWork
from ledger.stores.sqlite import AUTOCHECKPOINT_PAGES, Checkpointer, SqliteStore
from support import payloads as P


@pytest.fixture
def sqlite_book(tmp_path: Path) -> Iterator[ledger.Ledger]:
    with ledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        yield opened


def _commits(sqlite_book: ledger.Ledger) -> list[tuple[Any, int]]:
    """Each commit's DBAPI connection and its automatic checkpoint setting as it commits."""
    seen: list[tuple[Any, int]] = []
    store = sqlite_book.store
    assert isinstance(store, SqliteStore)

    @event.listens_for(store.engine, "commit")
    def before_commit(connection: Any) -> None:
        driver = connection.connection.driver_connection
        seen.append((driver, driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0]))

    return seen


def _placed(sqlite_book: ledger.Ledger, count: int) -> None:
    sqlite_book.deposit("u1", "EUR", "1000.00", reference="seed")
    sqlite_book.place_bets(P.place(*(P.entry(uid) for uid in range(1, count + 1))))


def _autocheckpoint(driver: sqlite3.Connection) -> int:
    return int(driver.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


def test_a_huge_close_commits_without_copying_its_log_and_a_thread_copies_it_after(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    _placed(sqlite_book, 4)
    commits = _commits(sqlite_book)
    sqlite_book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    [(driver, during)] = commits
    assert during == 0
    # The connection went back to the pool copying at commit again.
    assert _autocheckpoint(driver) == AUTOCHECKPOINT_PAGES
    store = sqlite_book.store
    assert isinstance(store, SqliteStore)
    store._checkpointer.join(10)
    # Every frame of the log is in the database: nothing left for a later commit to copy.
    with sqlite3.connect(tmp_path / "ledger.db") as database:
        busy, frames, copied = database.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert (busy, copied) == (0, frames)
    # A small write commits as it always did.
    commits.clear()
    sqlite_book.deposit("u1", "EUR", "1.00", reference="after")
    assert [setting for _, setting in commits] == [AUTOCHECKPOINT_PAGES]
    assert sqlite_book.check().ok


def test_a_huge_close_whose_commit_fails_leaves_its_connection_copying_again(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    _placed(sqlite_book, 4)
    requested: list[bool] = []
    store = sqlite_book.store
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
        sqlite_book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    # Rolled back, and back in the pool copying at commit: no log of its own to copy later.
    assert _autocheckpoint(used[0]) == AUTOCHECKPOINT_PAGES
    assert requested == []
    monkeypatch.undo()
    view = sqlite_book.bet(1)
    assert view is not None
    assert view.state == "placed"


def test_a_small_close_commits_as_every_write_does(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(closes, "SET_BASED_FROM", 5)
    _placed(sqlite_book, 4)
    commits = _commits(sqlite_book)
    sqlite_book.settle(P.settle(7, *((uid, "5.00") for uid in range(1, 5))))
    assert [setting for _, setting in commits] == [AUTOCHECKPOINT_PAGES]


def _wal_salt(database: Path) -> bytes:
    """The log's salt (its header's bytes 16 to 23, sqlite.org/fileformat2.html#walformat):
    SQLite draws a new one each time the log starts over from its first frame."""
    with open(database.with_name(database.name + "-wal"), "rb") as log:
        return log.read(24)[16:24]


def test_a_write_commits_with_the_backstop_only_and_the_checkpointer_copies_its_log(
    sqlite_book: ledger.Ledger, tmp_path: Path
) -> None:
    commits = _commits(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "10.00", reference="one")
    assert [setting for _, setting in commits] == [AUTOCHECKPOINT_PAGES]
    assert AUTOCHECKPOINT_PAGES > 1000  # SQLite's default, which copied in every eighth commit
    store = sqlite_book.store
    assert isinstance(store, SqliteStore)
    store._checkpointer.join(10)
    with sqlite3.connect(tmp_path / "ledger.db") as database:
        busy, frames, copied = database.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert frames > 0
    assert (busy, copied) == (0, frames)


def test_after_a_pass_the_next_commit_copies_the_rest_so_the_log_starts_over(
    sqlite_book: ledger.Ledger, tmp_path: Path
) -> None:
    store = sqlite_book.store
    assert isinstance(store, SqliteStore)
    checkpointer = store._checkpointer
    # No pass of the thread's own during the test (its next is 60 s away): the test runs one.
    checkpointer.interval = 60.0
    checkpointer._began = time.monotonic()
    _placed(sqlite_book, 50)
    checkpointer._pass()  # copies all of the log, and says so to the next commit
    # It begins on a copied log: starts it over.
    sqlite_book.deposit("u1", "EUR", "1.00", reference="two")
    salt = _wal_salt(tmp_path / "ledger.db")
    # The pass had finished, so this commit copied its own pages after committing: the next
    # write begins with the whole log in the database, and starts it over.
    sqlite_book.deposit("u1", "EUR", "1.00", reference="three")
    assert _wal_salt(tmp_path / "ledger.db") != salt
    assert sqlite_book.check().ok


def test_the_checkpointer_passes_at_most_once_an_interval_and_closing_ends_its_wait(
    tmp_path: Path,
) -> None:
    database = tmp_path / "plain.db"
    with sqlite3.connect(database) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
    checkpointer = Checkpointer(database, interval=60.0)
    passes: list[float] = []
    done = threading.Event()

    def counted() -> None:
        passes.append(1.0)
        done.set()

    checkpointer._pass = counted  # type: ignore[method-assign]
    checkpointer.request()
    assert done.wait(10)  # the first request passes at once
    for _ in range(5):
        checkpointer.request()  # within the interval: one pass, due in 60 s
    thread = checkpointer._thread
    assert thread is not None
    assert thread.is_alive()
    assert passes == [1.0]
    checkpointer.close(10)  # ends the wait without passing again
    assert not thread.is_alive()
    assert passes == [1.0]
    checkpointer.request()  # closed: no more passes
    assert checkpointer._thread is None
