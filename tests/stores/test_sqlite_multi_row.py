"""SQLite's bulk inserts as multi-row INSERTs (ledger.stores.sqlite.SqliteDialect.insert_rows):
every row lands exactly once, in order, through a handful of statement shapes within the
connection's limit on parameters, with the same conflict rules as one row at a time."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, String, Table, text
from sqlalchemy.exc import IntegrityError

from ledger.stores.sqlite import MULTI_ROW, SqliteStore
from ledger.stores.sqlite.bulk import multi_row_chunks

metadata = MetaData()
things = Table(
    "things", metadata, Column("id", Integer, primary_key=True), Column("name", String(20))
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(f"sqlite:///{tmp_path}/ledger.db")
    with store.engine.begin() as connection:
        connection.execute(text("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)"))
    yield store
    store.close()


def _insert(store: SqliteStore, rows: list[tuple[Any, ...]], **options: Any) -> list[Any]:
    with store.unit_of_work() as uow:
        store.dialect.insert_rows(uow._conn, things, ("id", "name"), rows, **options)
        uow.commit()
    with store.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text("SELECT * FROM things ORDER BY id"))]


@given(count=st.integers(0, 3 * MULTI_ROW + 7), largest=st.sampled_from([1, 2, 64, MULTI_ROW]))
def test_every_row_goes_into_exactly_one_statement_in_order_through_power_of_two_shapes(
    count: int, largest: int
) -> None:
    rows = [(n, f"r{n}") for n in range(count)]
    flattened: list[Any] = []
    shapes = []
    for size, statements in multi_row_chunks(rows, largest):
        shapes.append(size)
        for parameters in statements:
            assert len(parameters) == 2 * size
            flattened.extend(parameters)
    assert flattened == [value for row in rows for value in row]
    assert all(size & (size - 1) == 0 and size <= largest for size in shapes)
    # The largest shape as often as needed, then each smaller one at most once.
    assert len(shapes) == len(set(shapes))
    assert shapes == sorted(shapes, reverse=True)


@pytest.mark.parametrize("count", [1, 3, MULTI_ROW, MULTI_ROW + 1, 2 * MULTI_ROW + 255])
def test_a_bulk_insert_stores_every_row_exactly_once(store: SqliteStore, count: int) -> None:
    rows = [(n, f"r{n}") for n in range(count)]
    assert _insert(store, rows) == rows


def test_a_connection_that_binds_few_parameters_gets_smaller_statements(
    store: SqliteStore,
) -> None:
    with store.unit_of_work() as uow:
        driver = cast(sqlite3.Connection, uow._conn.connection.driver_connection)
        driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 7)  # three rows of two at most
        rows = [(n, "x") for n in range(50)]
        store.dialect.insert_rows(uow._conn, things, ("id", "name"), rows)
        uow.commit()
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM things")).scalar() == 50


def test_a_repeated_key_is_refused_whole_and_ignored_when_conflicts_are_ignored(
    store: SqliteStore,
) -> None:
    rows = [(1, "a"), (2, "b"), (1, "c")]
    with pytest.raises(IntegrityError, match="UNIQUE"):
        _insert(store, rows)
    assert _insert(store, rows, ignore_conflicts=True) == [(1, "a"), (2, "b")]


def test_an_upsert_updates_the_rows_already_there_and_adds_the_others(store: SqliteStore) -> None:
    _insert(store, [(1, "a"), (2, "b")])
    upsert = "ON CONFLICT (id) DO UPDATE SET name = excluded.name"
    assert _insert(store, [(2, "B"), (3, "C")], upsert=upsert) == [(1, "a"), (2, "B"), (3, "C")]


@settings(max_examples=30, deadline=None)
@given(count=st.integers(min_value=0, max_value=3 * MULTI_ROW + 7))
def test_staged_rows_stream_into_the_temporary_table_exactly_once_in_order(count: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = SqliteStore(f"sqlite:///{directory}/ledger.db")
        try:
            rows = [(n, f"r{n}", n % 3 or None) for n in range(count)]
            columns = (("pos", "key"), ("name", "text"), ("extra", "int"))
            with store.unit_of_work() as uow:
                # A generator, as a huge close hands its items over: read once, never measured.
                store.dialect.stage(uow.connection, "staged", columns, (row for row in rows))
                found = uow.connection.execute(text("SELECT * FROM staged ORDER BY rowid"))
                assert [tuple(row) for row in found] == rows
        finally:
            store.close()
