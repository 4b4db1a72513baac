"""Postgres: a huge close's temporary tables fit in its session's memory, which goes with the
session afterwards (ledger.stores.postgres.temp_buffers)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import ledger
from ledger.commands import closes
from ledger.stores.postgres import PostgresDialect, PostgresStore, temp_buffers
from support import payloads as P


def _closing_backends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The server process of each set-based close's connection, as the close stages."""
    seen: list[int] = []
    created = PostgresDialect.temp_table

    def noted(self: PostgresDialect, connection: Any, name: str, columns: Any) -> None:
        if name == "close_stage":
            seen.append(connection.exec_driver_sql("SELECT pg_backend_pid()").scalar())
        created(self, connection, name, columns)

    monkeypatch.setattr(PostgresDialect, "temp_table", noted)
    return seen


def _alive(store: PostgresStore, pid: int) -> bool:
    with store.engine.connect() as connection:
        found = connection.exec_driver_sql(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).scalar()
    return bool(found)


def test_every_connection_has_room_for_a_huge_close_in_its_own_memory(
    pg_book: ledger.Ledger,
) -> None:
    store = pg_book.store
    assert isinstance(store, PostgresStore)
    with store.engine.connect() as connection:
        room = connection.exec_driver_sql("SHOW temp_buffers").scalar()
    assert room == temp_buffers.TEMP_BUFFERS


def test_a_connection_that_staged_a_huge_close_is_closed_and_a_smaller_ones_is_kept(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = pg_book.store
    assert isinstance(store, PostgresStore)
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    monkeypatch.setattr(temp_buffers, "RETIRE_FROM", 6)
    backends = _closing_backends(monkeypatch)
    pg_book.place_bets(P.place(*(P.entry(uid, ticket="t") for uid in range(1, 11))))

    assert pg_book.settle(P.settle(7, *((uid, "1.00") for uid in range(1, 5)))).closed
    assert _alive(store, backends[-1])  # back in the pool

    assert pg_book.settle(P.settle(7, *((uid, "1.00") for uid in range(5, 11)))).closed
    deadline = time.monotonic() + 10
    while _alive(store, backends[-1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(store, backends[-1])
    # And the ledger goes on writing, on the connections it kept or opens anew.
    pg_book.deposit("u2", "EUR", "1.00", reference="after")
