"""What a failover asks of the ledger, on every store.

- A commit whose outcome is unknown (the connection died during COMMIT, which may or may not have
  made it durable) is answered 503, never 200 and never 4xx; the platform's re-send then resolves
  it idempotently: the work is applied exactly once whichever way the COMMIT went.
- A read replica serves reports only: every money decision (a balance before a debit, a bet's
  state, an idempotency key) reads the primary inside the command's own transaction, so a replica
  that is behind, however far, makes a report stale but never a decision wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

import ledger
from ledger.stores import open_store
from support import payloads as P
from support.books import balance, raises_key
from support.httpkit import free_port

D = Decimal


class LostCommit:
    """A unit of work whose COMMIT reaches the database, then loses the connection's answer."""

    def __init__(self, inner: Any, store: LostCommitStore) -> None:
        self._inner = inner
        self._store = store

    def __enter__(self) -> LostCommit:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._inner.__exit__(*exc)

    def commit(self) -> None:
        self._inner.commit()
        if self._store.lose_next:
            self._store.lose_next = False
            # What the driver raises when the server vanishes mid-COMMIT, as the store
            # translates it: the client cannot know whether the COMMIT took effect.
            lost = OperationalError(
                "COMMIT", {}, Exception("server closed the connection unexpectedly")
            )
            raise self._store.dialect.translate(lost)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class LostCommitStore:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.url = inner.url
        self.lose_next = False

    def unit_of_work(self, *, write: bool = True, bulk: bool = False) -> Any:
        uow = self._inner.unit_of_work(write=write, bulk=bulk)
        return LostCommit(uow, self) if write else uow

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture(params=[True, False], ids=["group-commit", "direct"])
def flaky(request: pytest.FixtureRequest, store_url: str) -> Iterator[tuple[ledger.Ledger, Any]]:
    store = LostCommitStore(open_store(store_url))
    with ledger.Ledger(store, group_commit=request.param) as book:
        book.deposit("u1", "EUR", "100.00", reference="seed")
        yield book, store


def unknown_outcome(book: ledger.Ledger, store: Any, send: Any) -> None:
    store.lose_next = True
    with pytest.raises(ledger.LedgerError) as info:
        send()
    assert info.value.status == 503, (info.value.key, info.value.message)


def test_a_commit_whose_outcome_is_unknown_answers_503_and_the_resend_applies_it_once(
    flaky: tuple[ledger.Ledger, Any],
) -> None:
    book, store = flaky
    place = P.place(P.entry(1, amount=D("10.00"), rake=D("1.00")), P.entry(2, amount=D("5.00")))
    unknown_outcome(book, store, lambda: book.place_bets(place))
    book.place_bets(place)  # the platform's re-send: answered, not applied a second time
    assert balance(book, "u1") == (D("83.00"), D("17.00"))

    results = P.settle(7, (1, "30.00"))
    unknown_outcome(book, store, lambda: book.settle(results))
    book.settle(results)
    cancel = P.refund(7, 2)
    unknown_outcome(book, store, lambda: book.refund(cancel))
    book.refund(cancel)
    assert balance(book, "u1") == (D("119.00"), D("0.00"))
    assert book.check().ok


def second_database(store_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Another migrated database on the same kind of store: the stand-in for a replica."""
    if store_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path}/replica.db"
        ledger.open_ledger(url).close()
        return url
    cluster = request.getfixturevalue("postgres_cluster")
    name = cluster.create_database(cluster.migrated_template())
    request.addfinalizer(lambda: cluster.drop_database(name))
    return str(cluster.url(name))


def test_reports_read_the_replica_and_no_money_decision_ever_does(
    store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    replica_url = second_database(store_url, tmp_path, request)
    # The "replica" disagrees with the primary as much as a replica ever could: it holds a rich
    # user, a placed bet 1 and a placed bet 3 that the primary never saw.
    with ledger.open_ledger(replica_url) as stale:
        stale.deposit("u1", "EUR", "1000.00", reference="stale")
        stale.place_bets(P.place(P.entry(1, amount=D("10.00")), P.entry(3, amount=D("10.00"))))

    with ledger.open_ledger(store_url, read_url=replica_url) as book:
        book.deposit("u1", "EUR", "20.00", reference="seed")
        # Reports come from the replica...
        assert balance(book, "u1") == (D("978.00"), D("22.00"))
        assert book.bet(3) is not None
        # ...decisions from the primary: its 20.00 cannot pay 55.00 whatever the replica says,
        with raises_key("user.insufficient_funds"):
            book.place_bets(P.place(P.entry(2, amount=D("50.00"), rake=D("5.00"))))
        # bet 1 is new on the primary (debited, not answered as a replay of the replica's),
        book.place_bets(P.place(P.entry(1, amount=D("10.00"))))
        # and bet 3, placed only on the replica, does not exist for a settle.
        with raises_key("bet.not_found"):
            book.settle(P.settle(7, (3, "5.00")))
        assert book.check().ok  # the audit reads the primary
        assert book.replica_lag() == 0.0  # a database that is not in recovery is not behind

    with ledger.open_ledger(store_url) as primary:
        assert balance(primary, "u1") == (D("9.00"), D("11.00"))
        assert primary.replica_lag() is None


def test_a_read_replica_that_is_down_fails_reports_only_never_money(postgres_url: str) -> None:
    down = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nowhere"
    with ledger.open_ledger(postgres_url, migrate=True, read_url=down, connect_timeout=1) as book:
        book.deposit("u1", "EUR", "20.00", reference="seed")
        book.place_bets(P.place(P.entry(1, amount=D("10.00"))))
        book.ping()
        assert book.check().ok
        with raises_key("store.unavailable"):
            book.statement("u1")
        with raises_key("store.unavailable"):
            book.replica_lag()
