"""An in-memory store for the writers' rules, and commands that write plain values into it.

The writers (:mod:`ledger.writer`) need of a store only its units of work: opened, savepoints,
``flush``, ``commit``, and rollback on exit. :class:`FakeStore` keeps each unit's writes in a
list and makes them durable at commit, so that what a writer committed, rolled back or answered
can be read back without a database. The commands (:class:`Write`, :class:`Entry`) write plain
values and fail as a test asks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from ledger.errors import LedgerError
from ledger.stores import Retry
from ledger.writer import Single


class FakeUnit:
    """One unit of work of :class:`FakeStore`: its writes are durable only once committed."""

    def __init__(self, store: FakeStore, bulk: bool) -> None:
        self.store = store
        self.bulk = bulk
        self.writes: list[Any] = []
        self.savepoints = 0
        self.flushes = 0

    def __enter__(self) -> Self:
        self.store.units.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.writes = []  # whatever was not committed is rolled back

    def write(self, value: Any) -> None:
        self.writes.append(value)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self.savepoints += 1
        mark = len(self.writes)
        try:
            yield
        except BaseException:
            del self.writes[mark:]
            raise

    def flush(self) -> None:
        self.flushes += 1

    def commit(self) -> None:
        failure = self.store.commit_failures.pop(0) if self.store.commit_failures else None
        if failure is not None:
            raise failure
        with self.store.lock:
            self.store.committed.extend(self.writes)
        self.writes = []


@dataclass
class FakeStore:
    """A store whose units of work keep their writes in memory; ``commit_failures``: the
    errors the next commits raise, in order (None: that commit succeeds)."""

    single_writer: bool = True
    committed: list[Any] = field(default_factory=list)
    units: list[FakeUnit] = field(default_factory=list)
    commit_failures: list[BaseException | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def unit_of_work(self, *, write: bool = True, bulk: bool = False) -> FakeUnit:
        return FakeUnit(self, bulk)


@dataclass(frozen=True)
class Write(Single):
    """A command alone: writes ``value``, then raises ``error`` if one is given; ``races``
    times a Retry first (another writer got there first)."""

    value: Any
    error: BaseException | None = None
    size: int = 1
    deferred_: bool = False
    bulk_: bool = False
    races: list[int] = field(default_factory=list)  # a countdown shared by its copies

    @property
    def deferred(self) -> bool:
        return self.deferred_

    @property
    def bulk(self) -> bool:
        return self.bulk_

    def apply(self, uow: Any) -> Any:
        if self.races and self.races[0] > 0:
            self.races[0] -= 1
            raise Retry(f"{self.value} lost a race")
        uow.write(self.value)
        if self.error is not None:
            raise self.error
        return self.value


@dataclass(frozen=True)
class Entry(Single):
    """A batched, groupable command (as a Place Bet is): writes ``value``; refused with
    ``refusal`` (nothing written); a group with a ``poison`` entry fails as a whole."""

    value: Any
    refusal: LedgerError | None = None
    poison: bool = False
    size: int = 1
    applied_in: list[str] = field(default_factory=list)  # "alone" or "group", per call

    @property
    def batched(self) -> bool:
        return True

    @property
    def groupable(self) -> bool:
        return True

    def apply(self, uow: Any) -> Any:
        self.applied_in.append("alone")
        if self.refusal is not None:
            raise self.refusal
        uow.write(self.value)
        return self.value

    def apply_group(self, uow: Any, group: Sequence[Any]) -> list[Any]:
        for entry in group:
            entry.applied_in.append("group")
        if any(entry.poison for entry in group):
            uow.write("written before the group failed")
            raise RuntimeError("the group failed as a whole")
        outcomes: list[Any] = []
        for entry in group:
            if entry.refusal is not None:
                outcomes.append(entry.refusal)
            else:
                uow.write(entry.value)
                outcomes.append(entry.value)
        return outcomes
