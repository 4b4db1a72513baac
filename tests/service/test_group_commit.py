"""Group commit: requests queued together share one transaction, and stay independent.

To put several requests in one batch, the writer is first kept busy by a command that waits on an
event; everything submitted meanwhile queues up and is taken as one batch when it is released.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from decimal import Decimal as D
from pathlib import Path
from typing import Any, cast

import pytest

import ledger
from ledger._process import BULK
from ledger.commands import Move, PlaceBets, closes
from ledger.domain import deposit
from ledger.service import payloads
from ledger.stores import Retry, UnitOfWork
from ledger.stores.sql import SqlUnitOfWork
from ledger.writer import GroupCommit, Single
from support import payloads as P
from support.books import batched, fail_commits


@pytest.fixture
def sqlite_book(tmp_path: Path) -> Iterator[ledger.Ledger]:
    with ledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        assert isinstance(opened.writer, GroupCommit)  # on by default for SQLite
        yield opened


def group_of(sqlite_book: ledger.Ledger) -> GroupCommit:
    assert isinstance(sqlite_book.writer, GroupCommit)
    return sqlite_book.writer


class Explode(Single):
    """Writes first, then fails: its savepoint must take its writes back with it."""

    size = 1

    def apply(self, uow: UnitOfWork) -> None:
        uow.post([deposit("u2", "EUR", 700, "doomed")])
        raise RuntimeError("injected failure in the middle of a unit of work")


def test_a_request_failing_inside_a_batch_is_rolled_back_alone(sqlite_book: ledger.Ledger) -> None:
    group = group_of(sqlite_book)

    futures = batched(
        group,
        lambda: [
            group.submit(Move(deposit("u1", "EUR", 500, "a"))),
            group.submit(Explode()),
            group.submit(Move(deposit("u3", "EUR", 500, "c"))),
        ],
    )
    assert futures[0].result() is True
    assert isinstance(futures[1].exception(), RuntimeError)
    assert futures[2].result() is True
    assert sqlite_book.balance("u1")[0].available == D("5.00")
    assert sqlite_book.balance("u3")[0].available == D("5.00")
    assert sqlite_book.balance("u2") == []
    assert sqlite_book.check().ok


def test_place_bets_queued_together_are_decided_one_by_one(sqlite_book: ledger.Ledger) -> None:
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "20.00", "seed-u1")
    sqlite_book.deposit("u3", "EUR", "20.00", "seed-u3")

    def submit() -> list[Future[Any]]:
        return [
            sqlite_book.submit_place_bets(P.place(P.entry(1, user="u1"))),
            # u2 has nothing: refused alone with 402, writing nothing.
            sqlite_book.submit_place_bets(P.place(P.entry(2, user="u2"))),
            # u1 can afford one 11.00 entry of its 20.00, not two: the first one won.
            sqlite_book.submit_place_bets(P.place(P.entry(3, user="u1"))),
            sqlite_book.submit_place_bets(P.place(P.entry(4, user="u3"))),
            # A re-send of bet 1 in the same batch sees it placed: 200, nothing done.
            sqlite_book.submit_place_bets(P.place(P.entry(1, user="u1"))),
        ]

    futures = batched(group, submit)
    assert futures[0].result().placed == [1]
    assert isinstance(futures[1].exception(), ledger.InsufficientFunds)
    assert isinstance(futures[2].exception(), ledger.InsufficientFunds)
    assert futures[3].result().placed == [4]
    resent = futures[4].result()
    assert (resent.placed, resent.unchanged) == ([], [1])
    assert resent.secrets == futures[0].result().secrets
    assert [b.to_dict() for b in sqlite_book.balance("u1")] == [
        {"currency": "EUR", "available": "9.00", "held": "11.00"}
    ]
    assert sqlite_book.bet(2) is None
    assert sqlite_book.bet(3) is None
    assert sqlite_book.check().ok


def test_a_failed_commit_fails_every_request_of_the_batch(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "50.00", "seed")

    def submit() -> list[Future[Any]]:
        fail_commits(sqlite_book, monkeypatch)
        return [sqlite_book.submit_place_bets(P.place(P.entry(n, user="u1"))) for n in (1, 2)]

    futures = batched(group, submit)
    for future in futures:
        error = future.exception()
        assert isinstance(error, ledger.StoreUnavailable)
        assert error.status == 503  # retryable: the platform re-sends
    monkeypatch.undo()
    assert sqlite_book.bet(1) is None
    assert sqlite_book.bet(2) is None
    assert sqlite_book.balance("u1")[0].available == D("50.00")
    assert sqlite_book.check().ok


def test_a_refusal_that_rested_on_an_uncommitted_neighbour_is_answered_503_too(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "15.00", "seed")

    def submit() -> list[Future[Any]]:
        fail_commits(sqlite_book, monkeypatch)
        # Bet 2 is short only because bet 1 took 11.00 of the 15.00 first, in this batch.
        return [sqlite_book.submit_place_bets(P.place(P.entry(n, user="u1"))) for n in (1, 2)]

    futures = batched(group, submit)
    for future in futures:
        error = future.exception()
        assert isinstance(error, ledger.StoreUnavailable), error  # never the 402
    monkeypatch.undo()
    # Bet 1 never committed, so the platform's re-send of bet 2 is affordable and lands.
    assert sqlite_book.place_bets(P.place(P.entry(2, user="u1"))).placed == [2]
    assert sqlite_book.check().ok


# --- Place Bets at the head of a batch, applied without a savepoint ------------------------------


def test_a_place_bet_at_the_head_of_a_batch_failing_after_writing_leaves_nothing(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "50.00", "seed")
    real = PlaceBets.apply

    def written_then_failed(command: PlaceBets, uow: UnitOfWork) -> Any:
        real(command, uow)
        raise RuntimeError("injected failure after the request's writes")

    def submit() -> list[Future[Any]]:
        monkeypatch.setattr(PlaceBets, "apply", written_then_failed)
        return [
            sqlite_book.submit_place_bets(P.place(P.entry(1, user="u1"))),
            group.submit(Move(deposit("u3", "EUR", 500, "c"))),
        ]

    futures = batched(group, submit)
    assert isinstance(futures[0].exception(), RuntimeError)
    assert futures[1].result() is True
    assert sqlite_book.bet(1) is None
    assert sqlite_book.balance("u1")[0].available == D("50.00")
    assert sqlite_book.balance("u3")[0].available == D("5.00")
    assert sqlite_book.check().ok


def test_a_group_failing_as_a_whole_at_the_head_of_a_batch_is_applied_one_by_one(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "50.00", "seed")
    real = PlaceBets.apply_group

    def written_then_failed(self: PlaceBets, uow: UnitOfWork, group: Sequence[Any]) -> Any:
        real(self, uow, group)
        raise RuntimeError("injected failure after the group's writes")

    def submit() -> list[Future[Any]]:
        monkeypatch.setattr(PlaceBets, "apply_group", written_then_failed)
        return [sqlite_book.submit_place_bets(P.place(P.entry(n, user="u1"))) for n in (1, 2, 3)]

    futures = batched(group, submit)
    assert [future.result().placed for future in futures] == [[1], [2], [3]]
    # Held once each: the group's own writes went with its unit of work.
    assert [b.to_dict() for b in sqlite_book.balance("u1")] == [
        {"currency": "EUR", "available": "17.00", "held": "33.00"}
    ]
    assert sqlite_book.check().ok


def racing_once(runs: list[int]) -> Any:
    """``PlaceBets.apply`` that loses a race on its first run (noted in ``runs``), as a concurrent
    writer's key would make it, after writing: its unit of work must take that back."""
    real = PlaceBets.apply

    def apply(command: PlaceBets, uow: UnitOfWork) -> Any:
        result = real(command, uow)
        runs.append(1)
        if len(runs) == 1:
            raise Retry("a concurrent writer recorded the same key")
        return result

    return apply


def test_a_place_bet_at_the_head_of_a_batch_that_lost_a_race_runs_again_from_nothing(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "50.00", "seed")
    runs: list[int] = []

    def submit() -> list[Future[Any]]:
        monkeypatch.setattr(PlaceBets, "apply", racing_once(runs))
        return [
            sqlite_book.submit_place_bets(P.place(P.entry(1, user="u1"))),
            group.submit(Move(deposit("u3", "EUR", 500, "c"))),
        ]

    futures = batched(group, submit)
    assert futures[0].result(10).placed == [1]
    assert futures[1].result() is True
    assert len(runs) == 2
    # Held once: the first run's writes went with its unit of work.
    assert [b.to_dict() for b in sqlite_book.balance("u1")] == [
        {"currency": "EUR", "available": "39.00", "held": "11.00"}
    ]
    assert sqlite_book.check().ok


def count_savepoints(monkeypatch: pytest.MonkeyPatch, opened: list[str]) -> None:
    """From now on, note in ``opened`` each savepoint a unit of work opens."""
    real = SqlUnitOfWork.savepoint

    def counted(uow: SqlUnitOfWork) -> Any:
        opened.append("savepoint")
        return real(uow)

    monkeypatch.setattr(SqlUnitOfWork, "savepoint", counted)


def test_place_bets_at_the_head_of_a_batch_open_no_savepoint_and_the_rest_one_each(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "50.00", "seed")
    opened: list[str] = []

    def submit() -> list[Future[Any]]:
        count_savepoints(monkeypatch, opened)
        return [
            sqlite_book.submit_place_bets(P.place(P.entry(1, user="u1"))),
            sqlite_book.submit_place_bets(P.place(P.entry(2, user="u1"))),
            group.submit(Move(deposit("u2", "EUR", 500, "b"))),
            group.submit(Move(deposit("u3", "EUR", 500, "c"))),
        ]

    futures = batched(group, submit)
    assert [future.exception() for future in futures] == [None] * 4
    assert opened == ["savepoint", "savepoint"]


def test_a_batch_headed_by_anything_but_place_bets_keeps_a_savepoint_for_each_command(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = group_of(sqlite_book)
    opened: list[str] = []

    def submit() -> list[Future[Any]]:
        count_savepoints(monkeypatch, opened)
        return [group.submit(Move(deposit(f"u{n}", "EUR", 500, f"m{n}"))) for n in (1, 2)]

    futures = batched(group, submit)
    assert [future.result() for future in futures] == [True, True]
    assert opened == ["savepoint", "savepoint"]


@pytest.fixture
def pg_book(postgres_url: str) -> Iterator[ledger.Ledger]:
    """A Postgres ledger whose user u1 holds 50.00 EUR (deposit reference ``seed``)."""
    with ledger.open_ledger(postgres_url, migrate=True) as opened:
        assert isinstance(opened.writer, GroupCommit)
        opened.deposit("u1", "EUR", "50.00", "seed")
        yield opened


def queue_a_failure_once(uow: UnitOfWork, failed: list[int]) -> None:
    """The first time only (noted in ``failed``): a write whose transaction row, deposit:seed
    again, is a unique violation, and which Postgres only queues to send later."""
    if not failed:
        failed.append(1)
        uow.post([deposit("u9", "EUR", 100, "seed")])


def test_on_postgres_a_head_run_failing_on_a_statement_still_queued_is_refused_alone(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On Postgres a batch is Place Bets only (other commands go to the direct writer), applied
    # without a savepoint, and Postgres holds bulk inserts back to send with the next
    # statement. They are sent before the run ends, as a savepoint's release would send them:
    # a failure among them is the run's own (here a group's, then applied one by one), not
    # the commit's, which would answer every request of the batch 503.
    sqlite_book = pg_book
    group = group_of(sqlite_book)
    real = PlaceBets.apply_group
    failed: list[int] = []

    def queued_failure(self: PlaceBets, uow: UnitOfWork, group: Sequence[Any]) -> Any:
        outcomes = real(self, uow, group)
        queue_a_failure_once(uow, failed)
        return outcomes

    monkeypatch.setattr(PlaceBets, "apply_group", queued_failure)
    place = sqlite_book._place_command
    outcomes = group.apply_now(
        [place(P.place(P.entry(1, user="u1"))), place(P.place(P.entry(2, user="u1")))]
    )
    assert failed == [1]
    assert [(ok, answer.placed) for ok, answer in cast(Any, outcomes)] == [
        (True, [1]),
        (True, [2]),
    ]
    assert [b.to_dict() for b in sqlite_book.balance("u1")] == [
        {"currency": "EUR", "available": "28.00", "held": "22.00"}
    ]
    assert sqlite_book.balance("u9") == []
    assert sqlite_book.check().ok


def test_on_postgres_a_lone_command_failing_on_a_statement_held_for_the_commit_is_answered_once(
    pg_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A single Place Bet, the whole batch: what Postgres holds back goes with the COMMIT, and
    # the failure surfaces there, after the command itself returned. Nothing was committed:
    # the batch is applied again, and the command is answered by that alone, never also as the
    # success of the unit that was rolled back.
    sqlite_book = pg_book
    group = group_of(sqlite_book)
    real = PlaceBets.apply
    failed: list[int] = []

    def queued_failure(command: PlaceBets, uow: UnitOfWork) -> Any:
        outcome = real(command, uow)
        queue_a_failure_once(uow, failed)
        return outcome

    monkeypatch.setattr(PlaceBets, "apply", queued_failure)
    [answer] = group.apply_now([sqlite_book._place_command(P.place(P.entry(1, user="u1")))])
    assert failed == [1]
    assert isinstance(answer, tuple)
    ok, placed = answer
    assert ok
    assert placed.placed == [1]
    assert [b.to_dict() for b in sqlite_book.balance("u1")] == [
        {"currency": "EUR", "available": "39.00", "held": "11.00"}
    ]
    assert sqlite_book.balance("u9") == []
    assert sqlite_book.check().ok


# --- huge bodies: the collector paused until the answer -------------------------------------


def _huge_settle(uids: range) -> bytes:
    return json.dumps(P.settle(7, *((uid, "1.00") for uid in uids))).encode()


def test_a_huge_submitted_body_is_settled_and_the_collector_runs_again_once_it_is_answered(
    sqlite_book: ledger.Ledger,
) -> None:
    uids = range(1, 1001)
    sqlite_book.deposit("u1", "EUR", "100000.00", "seed")
    sqlite_book.place_bets(P.place(*(P.entry(uid) for uid in uids)))
    answer = sqlite_book.submit_settle(_huge_settle(uids))
    assert list(answer.result().closed) == list(uids)
    assert gc.isenabled()


def test_a_huge_submitted_body_that_is_not_json_is_refused_and_the_collector_resumes(
    sqlite_book: ledger.Ledger,
) -> None:
    with pytest.raises(ledger.InvalidRequest):
        sqlite_book.submit_settle(b" " * (BULK + 1) * payloads.BYTES_PER_BET).result()
    assert gc.isenabled()


def test_a_huge_commands_objects_are_freed_after_its_answer_with_the_collector_paused() -> None:
    """Freeing a million-participant command takes 0.3 s: the answer goes out first. The
    collector stays paused until then: its first pass would walk every object made meanwhile."""
    answer: Future[int] = Future()
    done_when_freed: list[tuple[bool, bool]] = []

    class Command:
        def __del__(self) -> None:
            done_when_freed.append((answer.done(), gc.isenabled()))

    class Writer:
        def run(self, command: Any) -> int:
            return 42

    body = b"x" * (BULK + 1) * payloads.BYTES_PER_BET
    assert gc.isenabled()
    writer: Any = Writer()
    payloads.answer_paused(answer, writer, body, lambda _: cast(Any, Command()))
    assert answer.result() == 42
    assert done_when_freed == [(True, False)]
    assert gc.isenabled()


def test_a_place_bet_after_a_set_based_refund_in_one_batch_sees_the_refunded_balance(
    sqlite_book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The refund is closed in SQL (set-based), past the balances the unit of work remembers
    # from the Place Bet before it: the one after must read u1's balance again.
    monkeypatch.setattr(closes, "SET_BASED_FROM", 1)
    group = group_of(sqlite_book)
    sqlite_book.deposit("u1", "EUR", "15.00", "seed")

    def submit() -> list[Future[Any]]:
        return [
            sqlite_book.submit_place_bets(P.place(P.entry(1, user="u1"))),
            sqlite_book.submit_refund(P.refund(7, 1)),
            # 11.00 of the 15.00 the refund gave back; 4.00 if the first read were trusted.
            sqlite_book.submit_place_bets(P.place(P.entry(2, user="u1"))),
        ]

    futures = batched(group, submit)
    assert futures[0].result().placed == [1]
    assert futures[1].result() is not None
    assert futures[2].result().placed == [2]
    assert [b.to_dict() for b in sqlite_book.balance("u1")] == [
        {"currency": "EUR", "available": "4.00", "held": "11.00"}
    ]
    assert sqlite_book.check().ok


def test_applied_now_each_command_answers_its_outcome_and_a_raced_one_the_future_of_its_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer process's way (GroupCommit.apply_now): no future for what is settled at once.
    with ledger.open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        group = group_of(opened)
        opened.deposit("u1", "EUR", "50.00", "seed")
        place = opened._place_command
        runs: list[int] = []
        placed, short = group.apply_now(
            [place(P.place(P.entry(1, user="u1"))), place(P.place(P.entry(2, user="u9")))]
        )
        assert not isinstance(placed, Future)
        assert not isinstance(short, Future)
        assert placed[0] is True
        assert placed[1].placed == [1]
        assert short[0] is False
        assert isinstance(short[1], ledger.InsufficientFunds)

        monkeypatch.setattr(PlaceBets, "apply", racing_once(runs))
        [raced] = group.apply_now([place(P.place(P.entry(3, user="u1")))])
        assert isinstance(raced, Future)
        assert raced.result(10).placed == [3]
        assert len(runs) == 2
        assert [b.to_dict() for b in opened.balance("u1")] == [
            {"currency": "EUR", "available": "28.00", "held": "22.00"}
        ]
        assert opened.check().ok
