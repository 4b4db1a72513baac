"""The SQL store and its unit of work: the transaction's lifecycle (connect, savepoints, commit,
the balance memo forgotten whenever it may no longer hold) and every write routed to its module.

The writes themselves: postings and balances in :mod:`.posting`, bets in :mod:`.bet_rows`, a
set-based close in :mod:`.staged_close`, events in :mod:`.events`, the journal's chain in
:mod:`.chain`, the delivery journal in
:mod:`.deliveries`, the directory in :mod:`.directory`. Reads live in :mod:`.queries`, the audit
in :mod:`.audit`; what differs between databases
(beginning a transaction, transaction ids, bulk rows, driver errors) is a :class:`.Dialect`,
implemented by :mod:`.sqlite` and :mod:`.postgres`. Everything else is the same SQL on both.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Literal, Self

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ..deliveries import DeliveryRecord
from ..directory import Seen
from ..domain import Bet, Transaction
from ..events import EventRow
from . import closing, directory, queries, revision
from . import deliveries as journal
from . import events as feed
from .base import ClosingOutcome, Staged
from .bet_rows import add_bets, close_bets
from .dialect import BalanceMemo, Dialect
from .limit_rows import SqlLimits
from .port import Audit, Reads
from .posting import post
from .reads import SqlReads
from .retention import SqlRetention
from .staged_close import close_staged

__all__ = ["SqlStore", "SqlUnitOfWork"]


class SqlStore:
    """A ledger in a SQL database: an engine, its URL, and the database's :class:`.Dialect`."""

    # True when the database admits one writer at a time (SQLite); see ledger.stores.port.Store.
    single_writer: bool = False

    def __init__(self, url: str, engine: Engine, dialect: Dialect) -> None:
        self.url = url
        self.engine = engine
        self.dialect = dialect
        # Events committed through this store object: the appended-events counter (metrics).
        self.events_appended = 0
        self._counting = threading.Lock()
        # The clock of the journal's times and the responsible-gambling limits (windows,
        # cooling-off): injectable, so that both read one time.
        self.clock: Callable[[], datetime] = _now

    def _appended(self, count: int) -> None:
        with self._counting:
            self.events_appended += count

    def unit_of_work(self, *, write: bool = True, bulk: bool = False) -> SqlUnitOfWork:
        return SqlUnitOfWork(self, write=write, bulk=bulk)

    @contextlib.contextmanager
    def reading(self) -> Iterator[Reads]:
        with self.translate_errors(), self.unit_of_work(write=False) as uow:
            yield SqlReads(uow.connection, self.dialect)

    @contextlib.contextmanager
    def auditing(self) -> Iterator[Audit]:
        with self.translate_errors(), self.unit_of_work(write=False) as uow:
            yield SqlReads(uow.connection, self.dialect)

    def close(self) -> None:
        self.engine.dispose()

    def replica_lag(self) -> float | None:
        """Seconds this database's data may be behind its primary; ``None`` on a primary."""
        return None

    def migrate(self) -> None:
        with self.translate_errors(), self.engine.begin() as connection:
            if revision.stored(connection) == revision.head():
                return
            # Imported here: Alembic is needed only for an upgrade (ledger.stores.revision).
            from .migrations import upgrade

            upgrade(connection)

    @contextlib.contextmanager
    def translate_errors(self) -> Iterator[None]:
        """Driver errors leave the store only as :class:`~ledger.errors.LedgerError`."""
        try:
            yield
        except SQLAlchemyError as error:
            raise self.dialect.translate(error) from error


class SqlUnitOfWork:
    """One database transaction; see :class:`ledger.stores.port.UnitOfWork`."""

    def __init__(self, store: SqlStore, *, write: bool, bulk: bool = False) -> None:
        self._store = store
        self._dialect = store.dialect
        self._write = write
        self._bulk = bulk
        self._connection: Connection | None = None
        # This transaction's event group (taken at its first event) and how many it holds.
        self._event_group: int | None = None
        self._event_count = 0
        # Whether this transaction wrote transactions or bets: then its commit appends the
        # journal chain's record of them (ledger.stores.chain).
        self._chained = False
        # The balances this transaction has read or written (ledger.stores.dialect.BalanceMemo),
        # for a dialect that may answer from them (SQLite); forgotten whenever they may no
        # longer hold.
        self._balances: BalanceMemo = {}
        self._committed = False
        self._limits: SqlLimits | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        with self._store.translate_errors():
            self._connection = self._dialect.connect(write=self._write, bulk=self._bulk)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        # Rollback is automatic; a failing rollback (the database went away) must not mask the
        # error that brought us here, and the pool discards the broken connection anyway.
        try:
            with contextlib.suppress(SQLAlchemyError):
                connection.rollback()
        finally:
            self._dialect.release(connection, committed=self._committed)

    @property
    def connection(self) -> Connection:
        """The open unit's connection (for the adapters' own mechanisms and tests)."""
        return self._conn

    @property
    def _conn(self) -> Connection:
        if self._connection is None:
            raise RuntimeError("the unit of work is not open")
        return self._connection

    @property
    def limits(self) -> SqlLimits:
        """The responsible-gambling limits in this transaction (:mod:`.limit_rows`)."""
        if self._limits is None:
            store = self._store
            self._limits = SqlLimits(
                lambda: self._conn, self._dialect, store.clock, store.translate_errors
            )
        return self._limits

    def commit(self) -> None:
        count = self._event_count
        with self._store.translate_errors():
            grp, chained = self._event_group, self._chained
            content = None
            if chained:
                assert grp is not None
                # Computed before any lock is taken, by the queries a verifier runs
                # (ledger.stores.chain).
                content = self._dialect.commit_content(self._conn, grp)
            if count:
                # The last statement before commit: it orders the ids (ledger.stores.events).
                assert grp is not None
                feed.seal(self._conn, self._dialect, grp, count)
            if chained:
                assert grp is not None
                self._dialect.seal_chain(self._conn, grp, content, self._store.clock())
            self._conn.commit()
        self._committed = True
        self._event_group, self._event_count, self._chained = None, 0, False
        self._balances.clear()
        if count:
            self._store._appended(count)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        with self._store.translate_errors():
            nested = self._conn.begin_nested()
        events_before = self._event_count
        try:
            yield
            self.flush()
        except BaseException:
            # What the savepoint wrote of balances is undone: the memo no longer says.
            self._balances.clear()
            with self._store.translate_errors():
                nested.rollback()
            # The rolled-back events' ordinals are free again: a group's stay contiguous.
            self._event_count = events_before
            raise
        with self._store.translate_errors():
            nested.commit()

    def flush(self) -> None:
        with self._store.translate_errors():
            self._dialect.send_queued(self._conn)

    # --- bets -----------------------------------------------------------------------------------

    def get_bets(self, uids: Sequence[int]) -> dict[int, Bet]:
        with self._store.translate_errors():
            return queries.get_bets(self._conn, self._dialect, uids)

    def bets_and_balances(
        self,
        uids: Sequence[int],
        debited: Collection[tuple[str, str]],
        credited: Collection[tuple[str, str]],
        users: Collection[str] = (),
    ) -> tuple[dict[int, Bet], dict[tuple[str, str], int]]:
        probe: dict[str, list[str]] = {}
        ordered = sorted(users)
        with self._store.translate_errors():
            found = queries.bets_and_balances(
                self._conn,
                self._dialect,
                uids,
                set(debited) | set(credited),
                self._balances,
                ordered,
                probe,
            )
        if "limited" in probe:
            # The limits' probe rode along (Postgres): the gate need not ask again.
            self.limits.probed(ordered, probe["limited"])
        return found

    def add_bets(self, new_bets: Sequence[Bet]) -> None:
        if new_bets:
            grp = self._chain_group()
            with self._store.translate_errors():
                add_bets(self._conn, self._dialect, new_bets, datetime.now(UTC), grp)

    def close_bets(self, closed: Sequence[Bet]) -> None:
        if closed:
            grp = self._chain_group()
            with self._store.translate_errors():
                close_bets(self._conn, self._dialect, closed, datetime.now(UTC), grp)

    def set_based_up_to(self) -> int | None:
        return self._dialect.set_based_up_to

    def bet_currencies(self, uids: Sequence[int]) -> set[str]:
        with self._store.translate_errors():
            return closing.bet_currencies(self._conn, self._dialect, uids)

    def close_staged(
        self,
        kind: Literal["refund", "settle"],
        rows: Sequence[Staged],
        key: str,
        chunk: int,
        request_id: str | None,
        seen: Seen,
        describe_users: bool,
    ) -> int | ClosingOutcome | None:
        limit = closing.bound(len(rows))
        if not closing.staged_within(rows, limit):
            return None
        # A set-based close writes balances in SQL, past the memo.
        self._balances.clear()
        # Its rows name this unit's group (taken through event_slots): chained at commit.
        self._chain_group()
        with self._store.translate_errors():
            return close_staged(
                self._conn,
                self._dialect,
                kind,
                rows,
                limit,
                key,
                chunk,
                request_id,
                seen,
                describe_users,
                event_slots=self.event_slots,
                now=self._store.clock,
            )

    # --- transactions ---------------------------------------------------------------------------

    def get_transaction(self, key: str) -> Transaction | None:
        with self._store.translate_errors():
            return queries.get_transaction(self._conn, key)

    def post(self, new_transactions: Sequence[Transaction]) -> None:
        if not new_transactions:
            return
        grp = self._chain_group()
        try:
            with self._store.translate_errors():
                clock = self._store.clock
                post(self._conn, self._dialect, self._balances, new_transactions, clock, grp)
        except BaseException:
            # Some of it may have been written (a failed executemany keeps its earlier rows):
            # the memo no longer says what the balances are.
            self._balances.clear()
            raise

    # --- the event feed ---------------------------------------------------------------------------

    def _chain_group(self) -> int:
        """This unit's group, which the rows it writes name: its commit is chained."""
        self._chained = True
        return self.event_slots(0)[0]

    def event_slots(self, count: int) -> tuple[int, int]:
        if self._event_group is None:
            with self._store.translate_errors():
                self._event_group = self._dialect.allocate_event_group(self._conn)
        first = self._event_count
        self._event_count += count
        return self._event_group, first

    def append_events(self, rows: Sequence[EventRow]) -> None:
        if not rows:
            return
        grp, first = self.event_slots(len(rows))
        with self._store.translate_errors():
            feed.append(self._conn, self._dialect, grp, first, rows)

    # --- the delivery journal -------------------------------------------------------------------

    def record_deliveries(self, records: Sequence[DeliveryRecord]) -> None:
        with self._store.translate_errors():
            journal.record(self._conn, self._dialect, records)

    # --- retention ----------------------------------------------------------------------------

    def retention(self) -> SqlRetention:
        return SqlRetention(self._conn, self._store.translate_errors)

    # --- reads and the audit --------------------------------------------------------------------

    def account_balances(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        with self._store.translate_errors():
            return self._dialect.read_balances(self._conn, keys, self._balances)

    # --- the directory (ledger.directory) ---------------------------------------------------

    def record_seen(self, seen: Seen) -> None:
        with self._store.translate_errors():
            directory.record_seen(self._conn, self._dialect, seen, datetime.now(UTC))


def _now() -> datetime:
    return datetime.now(UTC)
