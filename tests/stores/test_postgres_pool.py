"""Postgres: the writers' connection pool: a connection pinged only after sitting idle, one
whose server went away replaced before use, and a busy one's failure costing one unit of work.
"""

from __future__ import annotations

from decimal import Decimal as D
from typing import Any

import pytest

import ledger
from ledger.stores.postgres import PostgresStore
from ledger.stores.postgres import pool as pg_pool
from support.books import balance, postgres_store


def _backend(store: PostgresStore) -> int:
    with store.engine.connect() as connection:
        return int(connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def _terminate_all(store: PostgresStore) -> None:
    """End every server process of the store's database: all its pooled connections are dead."""
    other = PostgresStore(store.url)
    try:
        with other.engine.connect() as connection:
            connection.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    finally:
        other.close()


def test_a_pooled_connection_is_pinged_only_after_sitting_idle(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store(pg_book)
    pings: list[object] = []
    ping = store.engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        pings.append(dbapi_connection)
        return bool(ping(dbapi_connection))

    monkeypatch.setattr(store.engine.dialect, "do_ping", counted)
    monkeypatch.setattr(pg_pool, "PING_IDLE", 60.0)
    for _ in range(3):
        _backend(store)
    assert pings == []  # used moments ago: alive, or its first statement says otherwise
    monkeypatch.setattr(pg_pool, "PING_IDLE", 0.0)
    _backend(store)
    assert len(pings) == 1


def test_an_idle_pooled_connection_whose_server_went_away_is_replaced_before_use(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store(pg_book)
    gone = _backend(store)
    _terminate_all(store)
    monkeypatch.setattr(pg_pool, "PING_IDLE", 0.0)  # they have sat idle
    assert _backend(store) != gone  # no error: the ping found it dead, a new one was used
    pg_book.deposit("u1", "EUR", "1.00", reference="after")
    assert balance(pg_book, "u1") == (D("1.00"), D("0.00"))


def test_a_busy_pooled_connection_whose_server_went_away_fails_one_unit_then_the_pool_is_new(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store(pg_book)
    _backend(store)
    _terminate_all(store)
    monkeypatch.setattr(pg_pool, "PING_IDLE", 60.0)  # every pooled connection used moments ago
    # Not pinged: its first statement fails, retryable for the platform.
    with pytest.raises(ledger.StoreUnavailable):
        pg_book.deposit("u1", "EUR", "1.00", reference="lost")
    pg_book.deposit("u1", "EUR", "1.00", reference="lost")  # the re-send
    assert balance(pg_book, "u1") == (D("1.00"), D("0.00"))
