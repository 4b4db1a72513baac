"""Postgres: how a group of Place Bets reaches the database, and the guards it leaves in place.

Inserts nobody reads back are queued on the connection and sent, pipelined, with the next
statement that needs an answer (or with the COMMIT); so are the balance writes of accounts the
group's first read locked, the bets read after the lock; ids come from per-process blocks of
their sequences; key lookups are planned with their keys, never prepared; the balancing check
runs once per INSERT statement. These tests prove what each of those must keep: a queued
failure surfaces, translated, inside its own unit of work; a rolled-back savepoint sends
nothing; the database still refuses an unbalanced transaction, now at the INSERT that seals it;
a re-send that waited for the first delivery's lock sees its bets; an account created by another
writer after the lock found it missing is a Retry, never added to. (The journal's checks as these
writes leave them: test_postgres_journal_checks; the pool: test_postgres_pool.)
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

import ledger
from ledger import commands, writer
from ledger.commands import closes
from ledger.domain import Bet, Funding, Transaction, TxnKind, transfer, withdrawal
from ledger.errors import LedgerError
from ledger.stores.base import Retry
from ledger.stores.postgres import ID_BLOCK, PostgresDialect, PostgresStore, arrays
from ledger.stores.postgres import pipeline as pg_pipeline
from support import payloads as P
from support.books import balance, postgres_store


def _bet(uid: int) -> Bet:
    return Bet(uid, "u1", 7, "EUR", 0, 0, Funding.FREE)


def _add_and_commit(store: PostgresStore, *groups: list[Bet]) -> None:
    with store.unit_of_work() as uow:
        for bets in groups:
            uow.add_bets(bets)
        uow.commit()


def _add_in_savepoint(uow: Any, bets: list[Bet]) -> None:
    with uow.savepoint():
        uow.add_bets(bets)


def _add_and_give_up(uow: Any, bets: list[Bet]) -> None:
    with uow.savepoint():
        uow.add_bets(bets)
        raise RuntimeError("given up")


def test_a_queued_insert_that_fails_surfaces_translated_in_its_unit_and_nothing_is_kept(
    pg_book: ledger.Ledger,
) -> None:
    pg_book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    store = postgres_store(pg_book)
    # A duplicate bet uid (what a concurrent writer's commit looks like): the ledger's Retry,
    # from the same unit of work, whichever later statement carried the queued insert.
    with pytest.raises(Retry):
        _add_and_commit(store, [_bet(2)], [_bet(1)])
    assert pg_book.bet(2) is None
    assert pg_book.check().ok


def test_inserts_queued_in_a_rolled_back_savepoint_are_never_sent(pg_book: ledger.Ledger) -> None:
    pg_book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    store = postgres_store(pg_book)
    with store.unit_of_work() as uow:
        # Queued and doomed (bet 1 exists): the savepoint's rollback must drop it unsent, so
        # that the caller sees its own error, not the duplicate's.
        with pytest.raises(RuntimeError, match="given up"):
            _add_and_give_up(uow, [_bet(1), _bet(3)])
        uow.add_bets([_bet(2)])
        uow.commit()
    assert pg_book.bet(2) is not None
    assert pg_book.bet(3) is None


def test_a_queued_insert_that_fails_rolls_back_to_its_savepoint_only(
    pg_book: ledger.Ledger,
) -> None:
    pg_book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    store = postgres_store(pg_book)
    with store.unit_of_work() as uow:
        uow.add_bets([_bet(2)])
        # The duplicate fails inside its savepoint (as a group of Place Bets does when another
        # process placed one of its bets), so the unit of work goes on, as with any failure.
        with pytest.raises(Retry):
            _add_in_savepoint(uow, [_bet(1), _bet(3)])
        uow.add_bets([_bet(4)])
        uow.commit()
    assert [pg_book.bet(uid) is not None for uid in (2, 3, 4)] == [True, False, True]


def test_a_group_of_place_bets_writes_every_row_it_queued(pg_book: ledger.Ledger) -> None:
    pg_book.deposit("u1", "EUR", "100.00", reference="seed")
    futures = [
        pg_book.submit_place_bets(P.place(P.entry(uid, amount=1, rake=0))) for uid in range(1, 31)
    ]
    for future in futures:
        future.result()
    report = pg_book.check()
    assert report.ok
    assert (report.bets, report.transactions) == (30, 31)
    page = pg_book.events(after=0, limit=100)
    assert sorted(event.bet for event in page.events if event.bet is not None) == list(range(1, 31))


def test_key_lookups_are_planned_with_their_keys_never_prepared(pg_book: ledger.Ledger) -> None:
    store = postgres_store(pg_book)
    # psycopg prepares a statement on its 5th run in one session (the default threshold).
    with store.engine.connect() as connection, connection.begin():
        for _ in range(8):
            assert list(store.dialect.select_bets(connection, [1, 2])) == []
            assert store.dialect.lock_balances(connection, [("user:u1", "EUR")]) == {}
        prepared = connection.exec_driver_sql(
            "SELECT statement FROM pg_prepared_statements"
        ).scalars()
        assert not [sql for sql in prepared if "FROM bets" in sql or "FOR UPDATE" in sql]


def test_ids_are_unique_across_stores_and_a_database_error_starts_a_fresh_block(
    pg_book: ledger.Ledger,
) -> None:
    first, second = postgres_store(pg_book), PostgresStore(postgres_store(pg_book).url)
    try:
        with first.engine.connect() as mine, second.engine.connect() as theirs:
            taken: list[int] = []
            for _ in range(3):
                taken += first.dialect.allocate_transaction_ids(mine, 5)
                taken += second.dialect.allocate_transaction_ids(theirs, 5)
            assert len(set(taken)) == len(taken)
            before = first.dialect.allocate_transaction_ids(mine, 1)[0]
            first.dialect.translate(IntegrityError("INSERT", None, Exception("lost")))
            after = first.dialect.allocate_transaction_ids(mine, 1)[0]
        # Not the next id of its old block: that block was given up with the error, and the
        # new one starts after the other store's.
        assert after > before + ID_BLOCK
    finally:
        second.close()


def test_a_connection_lost_while_a_huge_close_is_staged_answers_503_and_writes_nothing(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The set-based close stages its items by COPY on the driver's own connection: a database
    failure there is the store's 503 (the platform re-sends), like any other statement's, never
    a driver error escaping as a 500."""

    store = postgres_store(pg_book)
    monkeypatch.setattr(closes, "SET_BASED_FROM", 4)
    pg_book.place_bets(P.place(*(P.entry(uid, ticket="t") for uid in range(1, 5))))
    created = PostgresDialect.temp_table

    def then_lost(self: PostgresDialect, connection: Any, name: str, columns: Any) -> None:
        created(self, connection, name, columns)
        if name == "close_stage":  # the COPY comes next, on a connection that is gone
            pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            with store.engine.connect() as other, other.begin():
                other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    monkeypatch.setattr(PostgresDialect, "temp_table", then_lost)
    body = P.settle(7, *((uid, "5.00") for uid in range(1, 5)))
    with pytest.raises(LedgerError) as raised:
        pg_book.settle(body)
    assert raised.value.status == 503
    # Nothing was written: the re-sent settle closes every bet, once.
    monkeypatch.setattr(PostgresDialect, "temp_table", created)
    assert pg_book.settle(body).closed == [1, 2, 3, 4]


def test_a_batch_of_place_bets_reaches_postgres_in_two_round_trips(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_book.deposit("u1", "EUR", "100.00", reference="seed")
    pg_book.place_bets(P.place(P.entry(1, amount=1, rake=0)))  # the id blocks drawn
    commands = [
        pg_book._place_command(P.place(P.entry(uid, amount=1, rake=0))) for uid in range(2, 12)
    ]
    sent: list[str] = []
    pipeline, run = pg_pipeline._pipeline, pg_pipeline.run

    def counted_pipeline(*args: Any) -> Any:
        sent.append("pipeline")
        return pipeline(*args)

    def counted_run(connection: Any, sql: str | None, params: Any, *, lookup: bool = False) -> Any:
        if sql is not None and not connection.info.get(pg_pipeline._PENDING):
            sent.append(sql)  # sent on its own, outside a pipeline
        return run(connection, sql, params, lookup=lookup)

    monkeypatch.setattr(pg_pipeline, "_pipeline", counted_pipeline)
    monkeypatch.setattr(pg_pipeline, "run", counted_run)
    group = pg_book.writer
    assert isinstance(group, writer.GroupCommit)
    answers = group.apply_now(commands)
    # Its reads (the accounts locked, the bets); its writes with the commit. The pool pinged
    # nothing: its connection was used moments ago.
    assert sent == ["pipeline"] * 2
    assert [answer[0] for answer in answers if isinstance(answer, tuple)] == [True] * 10
    report = pg_book.check()
    assert report.ok, report.problems
    assert report.bets == 11


def test_a_resent_place_bet_waiting_on_the_first_ones_lock_is_answered_as_the_repeat(
    pg_book: ledger.Ledger,
) -> None:
    pg_book.deposit("u1", "EUR", "11.00", reference="seed")  # one entry's worth
    store = postgres_store(pg_book)
    command = pg_book._place_command(P.place(P.entry(1)))
    with store.unit_of_work() as first:
        placed = command.apply(first)
        with ThreadPoolExecutor(1) as pool:
            resent = pool.submit(_apply_and_commit, store, command)
            _wait_for_a_lock_wait(store)
            first.commit()
            again = resent.result(timeout=30)
    # The re-send's bets were read after the lock it waited for: it saw the first one's bets
    # (refused for the funds they took, were they read before, a 402 to a delivered entry).
    assert not isinstance(again, LedgerError)
    assert again.secrets == placed.secrets
    assert again.placed == []
    assert balance(pg_book, "u1") == (D("0.00"), D("11.00"))
    assert pg_book.check().ok


def _apply_and_commit(store: PostgresStore, command: commands.PlaceBets) -> Any:
    with store.unit_of_work() as uow:
        try:
            outcome = command.apply(uow)
        except LedgerError as error:
            return error
        uow.commit()
        return outcome


def _wait_for_a_lock_wait(store: PostgresStore) -> None:
    for _ in range(300):
        with store.engine.connect() as connection:
            waiting = connection.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).scalar()
        if waiting:
            return
        time.sleep(0.05)
    raise AssertionError("the second unit of work never waited on the first one's lock")


def test_an_account_missing_under_the_lock_and_created_meanwhile_is_a_retry_never_added_to(
    pg_book: ledger.Ledger,
) -> None:
    pg_book.deposit("u1", "EUR", "10.00", reference="seed")
    store = postgres_store(pg_book)
    mine = Transaction("gift", TxnKind.DEPOSIT, transfer("user:u1", "user:u2", "EUR", 500))
    with store.unit_of_work() as uow:
        # One side locked, the other known missing.
        _, found = uow.bets_and_balances([], [("user:u1", "EUR")], [("user:u2", "EUR")])
        assert found == {("user:u1", "EUR"): 1000}
        pg_book.deposit("u2", "EUR", "1.00", reference="meanwhile")  # another writer's commit
        uow.post([mine])  # queued: user:u2 created as new
        with pytest.raises(Retry):
            uow.commit()
    assert balance(pg_book, "u2") == (D("1.00"), D("0.00"))
    assert balance(pg_book, "u1") == (D("10.00"), D("0.00"))
    assert pg_book.check().ok


def test_writes_of_locked_balances_are_queued_and_never_prepared(pg_book: ledger.Ledger) -> None:
    pg_book.deposit("u1", "EUR", "100.00", reference="seed")
    store = postgres_store(pg_book)
    with store.unit_of_work() as uow:
        for n in range(8):  # psycopg prepares a statement on its 5th run in one session
            uow.bets_and_balances([], [("user:u1", "EUR")], [])
            uow.post([withdrawal("u1", "EUR", 100, f"out-{n}")])
            uow.flush()
        connection = uow._conn
        prepared = connection.exec_driver_sql(
            "SELECT statement FROM pg_prepared_statements"
        ).scalars()
        assert not [sql for sql in prepared if "UPDATE accounts" in sql or "FOR UPDATE" in sql]
        uow.commit()
    assert balance(pg_book, "u1") == (D("92.00"), D("0.00"))
    assert pg_book.check().ok


def test_bulk_arrays_of_every_kind_reach_postgres_exactly_as_given(pg_book: ledger.Ledger) -> None:
    now = datetime.now(UTC)
    cases: list[tuple[str, list[Any]]] = [
        ("text", arrays.Texts(["user:u1", "é ü 字", "", None, "a'b\"c,{}"])),
        ("text", arrays.Texts(["only"])),
        ("text", arrays.Texts([])),
        ("bigint", arrays.Bigints([0, -1, 2**63 - 1, -(2**63) + 1])),
        ("bigint", arrays.Bigints([1, None, 3])),
        ("numeric", arrays.Numerics([0, -5, 10**37, -(10**38) + 1, None])),
        ("timestamptz", arrays.Times([now, now, now])),
        ("timestamptz", arrays.Times([now, now - timedelta(days=1), None])),
    ]
    with postgres_store(pg_book).engine.connect() as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        for kind, values in cases:
            back = driver.execute(f"SELECT %b::{kind}[]", (values,)).fetchone()
            assert back is not None
            assert back[0] == list(values), kind


def test_a_batch_whose_writes_are_refused_at_commit_is_applied_again_telling_whose_failure(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_book.deposit("u1", "EUR", "100.00", reference="seed")
    pg_book.deposit("u2", "EUR", "100.00", reference="seed-2")
    commands = [pg_book._place_command(P.place(P.entry(uid))) for uid in (1, 2, 3)]
    decided = ledger.commands.PlaceBets.apply_group
    units: list[bool] = []
    first_unit = writer.GroupCommit._first_unit

    def counted(self: Any, *args: Any, flush: bool) -> Any:
        if self is group:
            units.append(flush)
        return first_unit(self, *args, flush=flush)

    def decided_then_raced(self: Any, uow: Any, group: Any) -> Any:
        outcomes = decided(self, uow, group)
        if len(units) == 1:
            # Another process places bet 2 for another user after this batch read the bets:
            # this batch's insert of bet 2, held back for the commit, fails there.
            with ledger.open_ledger(postgres_store(pg_book).url) as other:
                other.place_bets(P.place(P.entry(2, user="u2")))
        return outcomes

    group = pg_book.writer
    assert isinstance(group, writer.GroupCommit)
    monkeypatch.setattr(writer.GroupCommit, "_first_unit", counted)
    monkeypatch.setattr(ledger.commands.PlaceBets, "apply_group", decided_then_raced)
    answers = group.apply_now(commands)
    assert units == [False, True]  # refused at commit, then applied again, flushing
    oks = [answer[0] if isinstance(answer, tuple) else None for answer in answers]
    assert oks == [True, False, True]  # bet 2 is u2's: u1's request for it is refused alone
    assert isinstance(answers[1], tuple)
    assert isinstance(answers[1][1], LedgerError)
    assert balance(pg_book, "u1") == (D("78.00"), D("22.00"))
    assert balance(pg_book, "u2") == (D("89.00"), D("11.00"))
    report = pg_book.check()
    assert report.ok, report.problems
    assert report.bets == 3
