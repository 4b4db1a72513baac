"""Assertion helpers shared by the ledger test suites."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text

import ledger
from ledger.stores.postgres import PostgresStore
from ledger.stores.sql import SqlStore
from ledger.writer import Single
from support import payloads as P


@contextlib.contextmanager
def raises_key(key: str) -> Iterator[pytest.ExceptionInfo[ledger.LedgerError]]:
    """Expect a :class:`ledger.LedgerError` carrying exactly this stable ``key``."""
    with pytest.raises(ledger.LedgerError) as info:
        yield info
    assert info.value.key == key, (info.value.key, info.value.message)


def balance(book: ledger.Ledger, user: str, currency: str = "EUR") -> tuple[Decimal, Decimal]:
    """``(available, held)`` of one user in one currency."""
    (row,) = book.balance(user, currency)
    return row.available, row.held


def execute_raw(book: ledger.Ledger, *statements: str) -> None:
    """Run SQL straight on the store's engine, in one database transaction, and commit."""
    store = book.store
    assert isinstance(store, SqlStore)
    with store.engine.begin() as connection:
        for statement in statements:
            connection.execute(text(statement))


def house(book: ledger.Ledger, account: str, currency: str = "EUR") -> int:
    """The balance of any account in minor units, read straight from the database (0 if none)."""
    store = book.store
    assert isinstance(store, SqlStore)
    with store.engine.connect() as connection:
        found = connection.execute(
            text("SELECT balance FROM accounts WHERE name = :n AND currency = :c"),
            {"n": account, "c": currency},
        ).scalar()
    return int(found or 0)


class FailingPost:
    """A unit of work whose ``post`` fails after ``add_bets``/``close_bets`` already wrote, and
    whose set-based close (a huge refund or settle) fails after it wrote everything."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __enter__(self) -> FailingPost:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._inner.__exit__(*exc)

    def post(self, transactions: Any) -> None:
        raise RuntimeError("injected failure")

    def close_staged(self, *args: Any) -> Any:
        self._inner.close_staged(*args)
        raise RuntimeError("injected failure")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FailingStore:
    """A store whose write units of work fail in ``post``: for proving all-or-nothing."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.url = inner.url

    def unit_of_work(self, *, write: bool = True, bulk: bool = False) -> Any:
        uow = self._inner.unit_of_work(write=write, bulk=bulk)
        return FailingPost(uow) if write else uow

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Hold(Single):
    """A write command that keeps the writer busy until released: what is submitted meanwhile
    queues up behind it (one batch for group commit), or waits (a frozen database)."""

    size = 1

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def apply(self, uow: Any) -> None:
        self.started.set()
        self.release.wait(10)


def batched(group: Any, submit: Callable[[], list[Future[Any]]]) -> list[Future[Any]]:
    """Run ``submit`` while a group commit's writer is held, so that what it queues forms one
    batch; answers its futures once each is done."""
    hold = Hold()
    blocker = group.submit(hold)
    assert hold.started.wait(10)
    batches = group.batches
    futures = submit()
    hold.release.set()
    blocker.result(10)
    for future in futures:
        future.exception(10)  # wait for each, whatever its outcome
    assert group.batches == batches + 2, "the held command's batch, then exactly one more"
    return futures


def fail_commits(book: ledger.Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on (until ``monkeypatch.undo()``), every commit of the store fails."""
    store = book.store
    real = store.unit_of_work

    def failing_unit_of_work(*, write: bool = True, bulk: bool = False) -> Any:
        uow = real(write=write, bulk=bulk)

        def commit() -> None:
            raise ledger.StoreUnavailable("disk gone")

        uow.commit = commit  # type: ignore[method-assign]
        return uow

    monkeypatch.setattr(store, "unit_of_work", failing_unit_of_work)


def funded(book: ledger.Ledger, amount: str = "100.00", user: str = "u1") -> ledger.Ledger:
    """``book`` after a deposit of ``amount`` EUR to ``user``."""
    book.deposit(user, "EUR", amount, reference=f"seed-{user}")
    return book


def settled_and_refunded(book: ledger.Ledger) -> None:
    """A deposit, two entries in two tournaments, one settled with a prize, one refunded."""
    book.deposit("u1", "EUR", "100.00", reference="seed")
    book.place_bets(P.place(P.entry(1, pool=7), P.entry(2, pool=8)))
    book.settle(P.settle(7, (1, "4.00")))
    book.refund(P.refund(8, 2))


def postgres_store(book: ledger.Ledger) -> PostgresStore:
    """``book``'s store, which the test needs to be Postgres's."""
    store = book.store
    assert isinstance(store, PostgresStore)
    return store
