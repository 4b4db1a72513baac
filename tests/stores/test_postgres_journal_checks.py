"""Postgres: the journal's checks as the batched writes leave them: the balancing check at the
INSERT that seals a transaction, every transaction an insert names present at commit, and the
checks walking only the inserted rows and looking the journal up by key.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

import ledger
from ledger.stores.postgres import PostgresStore
from support import payloads as P
from support.books import execute_raw, postgres_store


def test_an_unbalanced_transaction_is_refused_by_the_insert_that_seals_it(
    pg_book: ledger.Ledger,
) -> None:
    pg_book.deposit("u1", "EUR", "100.00", reference="seed")
    store = postgres_store(pg_book)
    with store.engine.connect() as connection, connection.begin():
        connection.execute(
            text(
                "INSERT INTO postings (txn_id, account, currency, amount) VALUES "
                "(900001, 'user:u1', 'EUR', 5), (900001, 'house:cash', 'EUR', -5), "
                "(900002, 'user:u1', 'EUR', 5), (900002, 'house:cash', 'EUR', -4)"
            )
        )
        # Checked when the rows arrive, all of one INSERT at once: not only at commit.
        with pytest.raises(DBAPIError, match="unbalanced transaction 900002"):
            connection.execute(
                text(
                    "INSERT INTO transactions (id, idempotency_key, kind, created_at) VALUES "
                    "(900001, 'forged-1', 'deposit', now()), "
                    "(900002, 'forged-2', 'deposit', now())"
                )
            )
    assert pg_book.check().transactions == 1


def test_balanced_transactions_sealed_by_one_insert_are_accepted(pg_book: ledger.Ledger) -> None:
    store = postgres_store(pg_book)
    with store.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO postings (txn_id, account, currency, amount) VALUES "
                "(900001, 'user:u1', 'EUR', 5), (900001, 'house:cash', 'EUR', -5), "
                "(900002, 'user:u2', 'JPY', 7), (900002, 'house:cash', 'JPY', -7)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO transactions (id, idempotency_key, kind, created_at) VALUES "
                "(900001, 'hand-1', 'deposit', now()), (900002, 'hand-2', 'deposit', now())"
            )
        )
    assert pg_book.check().transactions == 2


def test_postings_for_a_sealed_transaction_are_still_refused(pg_book: ledger.Ledger) -> None:
    pg_book.deposit("u1", "EUR", "100.00", reference="seed")
    store = postgres_store(pg_book)
    with store.engine.connect() as connection:
        sealed = connection.execute(text("SELECT max(id) FROM transactions")).scalar_one()
    with pytest.raises(DBAPIError, match="sealed"), store.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO postings (txn_id, account, currency, amount) VALUES "
                f"({sealed}, 'user:u1', 'EUR', 5), ({sealed}, 'house:cash', 'EUR', -5)"
            )
        )
    assert pg_book.check().ok


def _unsealed_rows(store: PostgresStore) -> int:
    with store.engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM journal_unsealed")).scalar_one())


def test_every_transaction_an_insert_names_must_exist_at_commit(pg_book: ledger.Ledger) -> None:
    """Migration 0017's check at commit, which replaced the postings' foreign key: one INSERT
    naming a transaction that comes and one that never does is refused as a whole."""
    store = postgres_store(pg_book)
    forged = (
        "INSERT INTO postings (txn_id, account, currency, amount) VALUES "
        "(900001, 'user:u1', 'EUR', 5), (900001, 'house:cash', 'EUR', -5), "
        "(900002, 'user:u2', 'EUR', 5), (900002, 'house:cash', 'EUR', -5)",
        "INSERT INTO transactions (id, idempotency_key, kind, created_at) "
        "VALUES (900001, 'hand-1', 'deposit', now())",
    )
    with pytest.raises(IntegrityError, match="postings without their transaction, among"):
        execute_raw(pg_book, *forged)
    assert pg_book.check().transactions == 0
    assert _unsealed_rows(store) == 0


def test_the_commit_checks_leave_nothing_behind_and_skip_rolled_back_savepoints(
    pg_book: ledger.Ledger,
) -> None:
    """A savepoint rolled back takes its postings and their pending check with it; a commit
    checks (and clears) what is left: journal_unsealed holds rows of transactions in flight only."""
    pg_book.deposit("u1", "EUR", "100.00", reference="seed")
    pg_book.place_bets(P.place(P.entry(1), P.entry(2)))
    store = postgres_store(pg_book)
    with store.engine.begin() as connection:
        savepoint = connection.begin_nested()
        connection.execute(
            text(
                "INSERT INTO postings (txn_id, account, currency, amount) VALUES "
                "(900003, 'user:u1', 'EUR', 5), (900003, 'house:cash', 'EUR', -5)"
            )
        )
        assert connection.execute(text("SELECT count(*) FROM journal_unsealed")).scalar() == 1
        savepoint.rollback()
    assert _unsealed_rows(store) == 0
    assert pg_book.check().ok


def test_the_journal_checks_walk_the_inserted_rows_and_look_the_journal_up_by_key(
    pg_book: ledger.Ledger,
) -> None:
    """Both statement-level checks look the journal up by key, never walk it: the balanced
    check (``transactions_balanced``) once per inserted row (migration 0013: a plan the other
    way round, the whole journal outside and the transition table rescanned inside, grew with
    the journal, four times the database CPU per Place Bet with two workers); the sealed check
    (``postings_sealed``) once per statement, for the distinct transactions of its rows in one
    index scan (migration 0018). The plans are read through auto_explain, nested statements
    included, as notices."""
    # A young ledger, a session's first check, a group of rows: where the journal, nearly
    # empty, looked cheaper to walk than the group (the plan plpgsql then keeps).
    store = postgres_store(pg_book)
    plans: list[str] = []
    ids = range(900001, 900041)
    with store.engine.connect() as connection, connection.begin():
        driver = connection.connection.driver_connection
        assert driver is not None
        driver.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        for setting in (
            "LOAD 'auto_explain'",
            "SET auto_explain.log_min_duration = 0",
            "SET auto_explain.log_nested_statements = on",
            "SET auto_explain.log_level = notice",
        ):
            connection.exec_driver_sql(setting)
        legs = ", ".join(f"({n}, 'user:u1', 'EUR', 5), ({n}, 'house:cash', 'EUR', -5)" for n in ids)
        connection.execute(
            text(f"INSERT INTO postings (txn_id, account, currency, amount) VALUES {legs}")
        )
        rows = ", ".join(f"({n}, 'forged-{n}', 'deposit', now())" for n in ids)
        connection.execute(
            text(f"INSERT INTO transactions (id, idempotency_key, kind, created_at) VALUES {rows}")
        )
    balanced = next(plan for plan in plans if "postings p" in plan and "new_rows" in plan)
    lines = [line.strip() for line in balanced.splitlines() if line.strip()]
    loop = next(n for n, line in enumerate(lines) if "Nested Loop" in line)
    # The nested loop's outer side (its first child) is the transition table, scanned once;
    # the journal is reached by index, inside.
    outer = next(line for line in lines[loop + 1 :] if line.startswith("->"))
    assert "Named Tuplestore Scan" in outer, balanced
    assert "Index" in balanced.split("new_rows", 1)[1], balanced
    # The sealed check: the forty transactions of the eighty rows, looked up together.
    sealed = next(plan for plan in plans if "transactions t" in plan)
    for absent in ("new_rows", "Nested Loop", "Seq Scan"):
        assert absent not in sealed, sealed
    for present in ("Index", "ANY"):
        assert present in sealed, sealed
    assert any("new_rows" in plan and "Named Tuplestore Scan" in plan for plan in plans)
