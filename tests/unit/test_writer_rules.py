"""The writers' rules, on an in-memory store (no database): what a batch commits, what it takes
back, and what each command is answered.

The same rules hold on the real stores (tests/service/test_group_commit.py); here each is shown
alone, with commands that write plain values (support.fake_store).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, cast

import pytest

from ledger.errors import InsufficientFunds, LedgerError, StoreBusy, StoreUnavailable
from ledger.stores import Retry, Store
from ledger.writer import DirectWriter, GroupCommit
from support.fake_store import Entry, FakeStore, Write


def writers(store: FakeStore) -> tuple[GroupCommit, DirectWriter]:
    direct = DirectWriter(cast(Store, store), threads=2)
    return GroupCommit(cast(Store, store), direct), direct


def answers(group: GroupCommit, commands: list[Any]) -> list[tuple[bool, Any]]:
    """Apply ``commands`` as one batch; each one's (ok, result or error), retries awaited."""
    found = []
    for answer in group.apply_now(commands):
        if isinstance(answer, Future):
            try:
                found.append((True, answer.result(timeout=10)))
            except LedgerError as error:
                found.append((False, error))
        else:
            found.append(answer)
    return found


def test_a_batch_commits_once_and_answers_each_command_with_its_own_result() -> None:
    store = FakeStore()
    group, _ = writers(store)
    assert answers(group, [Write("a"), Entry("b"), Write("c")]) == [
        (True, "a"),
        (True, "b"),
        (True, "c"),
    ]
    assert store.committed == ["a", "b", "c"]
    assert len(store.units) == 1


@pytest.mark.parametrize("first", [Write("first"), Entry("first")], ids=["alone", "batched"])
def test_a_command_failing_in_a_batch_takes_back_its_own_writes_and_no_others(first: Any) -> None:
    store = FakeStore()
    group, _ = writers(store)
    refused = InsufficientFunds("no money")
    found = answers(group, [first, Write("doomed", error=refused), Write("last")])
    assert found == [(True, "first"), (False, refused), (True, "last")]
    assert store.committed == ["first", "last"]


def test_a_batch_failing_first_without_a_savepoint_is_applied_again_without_the_failure() -> None:
    store = FakeStore()
    group, _ = writers(store)
    refused = InsufficientFunds("no money")
    found = answers(group, [Entry("x", refusal=refused), Write("after")])
    assert found == [(False, refused), (True, "after")]
    assert store.committed == ["after"]


def test_consecutive_batched_commands_are_decided_together() -> None:
    store = FakeStore()
    group, _ = writers(store)
    entries = [Entry(n) for n in range(3)]
    assert answers(group, [*entries, Write("alone")]) == [
        (True, 0),
        (True, 1),
        (True, 2),
        (True, "alone"),
    ]
    assert [entry.applied_in for entry in entries] == [["group"]] * 3


def test_a_refusal_inside_a_group_refuses_that_command_alone() -> None:
    store = FakeStore()
    group, _ = writers(store)
    refused = InsufficientFunds("no money")
    found = answers(group, [Entry(1), Entry(2, refusal=refused), Entry(3)])
    assert found == [(True, 1), (False, refused), (True, 3)]
    assert store.committed == [1, 3]


@pytest.mark.parametrize("position", [0, 1], ids=["first-run", "later-run"])
def test_a_group_that_fails_as_a_whole_writes_nothing_and_its_commands_run_one_by_one(
    position: int,
) -> None:
    store = FakeStore()
    group, _ = writers(store)
    entries = [Entry(1), Entry(2, poison=True), Entry(3)]
    before = [Write("before")] if position else []
    found = answers(group, [*before, *entries])
    assert found[position:] == [(True, 1), (True, 2), (True, 3)]
    assert "written before the group failed" not in store.committed
    assert store.committed == [*(["before"] if position else []), 1, 2, 3]
    assert all(entry.applied_in == ["group", "alone"] for entry in entries)


def test_deferred_commands_are_applied_last_and_never_split_a_group() -> None:
    store = FakeStore()
    group, _ = writers(store)
    entries = [Entry(1), Entry(2)]
    journal = Write("journal row", deferred_=True)
    found = answers(group, [entries[0], journal, entries[1]])
    assert found == [(True, 1), (True, "journal row"), (True, 2)]
    assert store.committed == [1, 2, "journal row"]
    assert [entry.applied_in for entry in entries] == [["group"], ["group"]]


def test_a_command_that_lost_a_race_is_run_again_after_the_batch_and_applies_once() -> None:
    store = FakeStore()
    group, direct = writers(store)
    raced = Write("raced", races=[1])
    try:
        found = answers(group, [Write("a"), raced, Write("b")])
    finally:
        direct.close()
    assert found == [(True, "a"), (True, "raced"), (True, "b")]
    assert sorted(store.committed) == ["a", "b", "raced"]


def test_a_batch_whose_commit_fails_answers_every_command_503_even_one_refused_alone() -> None:
    # Nothing of the batch is durable: a refusal may have rested on a neighbour that never
    # committed, and a 4xx would tell the platform never to re-send it.
    store = FakeStore(commit_failures=[StoreUnavailable("the connection was lost")])
    group, _ = writers(store)
    found = answers(group, [Write("a", error=InsufficientFunds("no money")), Write("b")])
    assert [ok for ok, _ in found] == [False, False]
    assert all(type(error) is StoreUnavailable for _, error in found)
    assert store.committed == []


def test_held_writes_refused_at_commit_are_applied_again_so_each_command_gets_its_own_answer() -> (
    None
):
    # The database answered the commit (a refusal, not a lost connection): nothing committed,
    # and the batch is applied again, flushing each command's writes in its own scope.
    store = FakeStore(commit_failures=[StoreBusy("refused at commit"), None])
    group, _ = writers(store)
    assert answers(group, [Entry(1), Entry(2)]) == [(True, 1), (True, 2)]
    assert store.committed == [1, 2]
    assert [unit.flushes for unit in store.units] == [0, 1]


def test_a_batch_holding_a_bulk_command_runs_in_a_bulk_unit_of_work() -> None:
    store = FakeStore()
    group, _ = writers(store)
    answers(group, [Write("a"), Write("huge close", bulk_=True)])
    assert [unit.bulk for unit in store.units] == [True]


def test_on_a_store_of_many_writers_only_batched_commands_wait_for_the_group() -> None:
    store = FakeStore(single_writer=False)
    group, _ = writers(store)
    try:
        entry = group.submit(Entry("entry"))
        alone = group.submit(Write("alone"))
        assert (entry.result(timeout=10), alone.result(timeout=10)) == ("entry", "alone")
    finally:
        group.close()
    assert sorted(store.committed) == ["alone", "entry"]
    assert len(store.units) == 2  # the direct writer's unit, and the group's


def test_a_submitted_command_is_answered_after_the_commit_that_made_it_durable() -> None:
    store = FakeStore()
    group, _ = writers(store)
    try:
        future = group.submit(Write("a"))
        assert future.result(timeout=10) == "a"
        assert store.committed == ["a"]
    finally:
        group.close()


def test_the_direct_writer_runs_a_raced_command_again_until_it_sees_the_winner() -> None:
    store = FakeStore()
    direct = DirectWriter(cast(Store, store), max_attempts=3)
    assert direct.run(Write("w", races=[2])) == "w"
    assert store.committed == ["w"]
    with pytest.raises(StoreBusy, match="gave up after 3 attempts"):
        direct.run(Write("never", races=[3]))
    assert store.committed == ["w"]


def test_a_retry_is_a_busy_store_to_the_platform() -> None:
    assert issubclass(Retry, StoreBusy)
