"""What each SQL database supplies to the shared unit of work: the dialect hooks.

:mod:`.sql` (writes), :mod:`.queries` (reads) and :mod:`.audit` (``check``) are the same
SQLAlchemy Core on every database. Where databases differ (how a transaction begins, where
transaction ids come from, how bulk rows reach the driver, how driver errors read), they call a
:class:`Dialect`, implemented once per database by :mod:`.sqlite` and :mod:`.postgres`.

Bulk writes go straight to the driver (``executemany`` on SQLite, ``unnest`` arrays on
Postgres): a settle of a million participants is millions of rows, and per-row statement
building in SQLAlchemy would cost more than the database's own work.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, Table
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql import ColumnElement

from ..errors import LedgerError
from ..integrity.canonical import Content

__all__ = ["BalanceMemo", "Dialect", "remembered"]

# What one transaction has read or written of account balances, by ``(name, currency)``:
# ``None`` for an account known not to exist. The unit of work keeps one and forgets it whenever
# it may no longer hold: a savepoint rolled back, an error in a write, a set-based close (which
# writes balances in SQL), the commit.
BalanceMemo = dict[tuple[str, str], int | None]


def remembered(memo: BalanceMemo, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The balances ``memo`` holds for ``keys`` (all in it), of the accounts that exist."""
    known = {}
    for key in keys:
        balance = memo[key]
        if balance is not None:
            known[key] = balance
    return known


class Dialect(Protocol):
    """The database-specific half of a SQL store."""

    def connect(self, *, write: bool, bulk: bool = False) -> Connection:
        """A connection with a database transaction begun (``write`` takes the write lock
        where the database has one; ``bulk``: see :meth:`ledger.stores.port.Store.unit_of_work`).
        Ended by :meth:`release`, always."""
        ...

    def run(self, connection: Connection, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """Plain SQL in the driver's placeholder style, the cheapest way the store has: a
        cursor (or result) to fetch from. For the statements every commit runs."""
        ...

    def release(self, connection: Connection, *, committed: bool) -> None:
        """End what :meth:`connect` began, its transaction committed or rolled back: the
        database's own work after a commit (SQLite's copy of its log into the database), then
        the connection closed and what :meth:`connect` took let go (SQLite's writer lock
        across processes). Never raises for a commit that is already durable."""
        ...

    def allocate_transaction_ids(self, connection: Connection, count: int) -> list[int]:
        """``count`` new transaction ids, before their rows are written."""
        ...

    def allocate_delivery_ids(self, connection: Connection, count: int) -> list[int]:
        """``count`` new delivery journal ids, before their rows are written."""
        ...

    def check_deferred(self, connection: Connection) -> None:
        """Run now the checks the database would run at commit (deferred constraints), so that
        the event feed's counter lock, taken next, is held for no more than the commit."""
        ...

    def send_queued(self, connection: Connection) -> None:
        """Send now the statements the dialect holds back to send with a later one (Postgres
        queues bulk inserts nobody reads back): before a savepoint is released, so that a
        failure among them still rolls back to it."""
        ...

    def allocate_event_group(self, connection: Connection) -> int:
        """A new event group key, for the events of one transaction (ledger.stores.events)."""
        ...

    def seal_events(self, connection: Connection, grp: int, count: int, at: datetime) -> None:
        """Give the ``count`` events of group ``grp`` the next ids of the event counter and
        record the group's range, committed ``at``: the last write before commit
        (:func:`ledger.stores.events.seal`)."""
        ...

    def commit_content(self, connection: Connection, grp: int) -> Content | None:
        """The content hash of the rows commit ``grp`` wrote (:mod:`ledger.stores.chain`),
        computed before any lock is taken; ``None`` when the database computes it for the
        record's statement (Postgres, :mod:`ledger.stores.postgres.content`)."""
        ...

    def seal_chain(
        self, connection: Connection, grp: int, content: Content | None, at: datetime
    ) -> None:
        """Append the journal chain's record of commit ``grp`` (its rows' ``content``, as
        :meth:`commit_content` gave it), committed ``at``, unless its rows came to none: after
        :meth:`seal_events`, before commit (:mod:`ledger.stores.chain`)."""
        ...

    def translate(self, error: SQLAlchemyError) -> LedgerError:
        """Map a driver error to the ledger's error root."""
        ...

    def timestamp(self, moment: datetime) -> Any:
        """A timestamp as the driver should receive it in a bulk write."""
        ...

    @property
    def distinct_from(self) -> str:
        """The NULL-safe inequality operator of this database's SQL."""
        ...

    def minute(self, timestamp: str) -> str:
        """SQL for the minute (to compare, not to show) of the timestamp column ``timestamp``."""
        ...

    def insert_rows(
        self,
        connection: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        *,
        ignore_conflicts: bool = False,
        upsert: str | None = None,
    ) -> None:
        """Insert ``rows`` (tuples in the order of ``columns``) into ``table``.

        ``upsert`` is an ``ON CONFLICT (...) DO UPDATE SET ...`` clause, in the SQL both
        databases share (``excluded.<column>``); the rows must not repeat a conflict key.
        """
        ...

    # ``memo`` (a BalanceMemo): see there. A dialect may answer from it only for balances no
    # other writer can change before commit (all of them under SQLite's one writer; on Postgres
    # those this transaction has locked), and must then keep it current with what it writes,
    # or forget what it cannot follow.

    def debit_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[int, str, str]],
        memo: BalanceMemo | None = None,
    ) -> int:
        """Add each negative ``(delta, name, currency)`` unless the balance would go below zero;
        return how many accounts changed."""
        ...

    def upsert_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[str, str, str, int]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        """Add ``delta`` to each ``(name, currency, kind, delta)`` account, creating it if new;
        return the balances it leaves (the running balances of the postings start from them)."""
        ...

    def read_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        """The balances of the ``(name, currency)`` accounts that exist, as this transaction
        sees them (no lock: a decision read, guarded later by the store's conditional debit)."""
        ...

    def lock_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        """The balances of the ``(name, currency)`` accounts that exist, locked against every
        other writer until commit (so the running balances computed from them stay exact)."""
        ...

    def bets_and_balances(
        self,
        connection: Connection,
        uids: Sequence[int],
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
        users: Sequence[str] = (),
        probe: dict[str, list[str]] | None = None,
    ) -> tuple[list[Any], dict[tuple[str, str], int]]:
        """The bet rows among ``uids`` (as :meth:`select_bets`) and the balances of the ``keys``
        accounts that exist, locked as :meth:`lock_balances` locks them and remembered in
        ``memo``: a Place Bet's decision, whose writes follow in the same transaction. A
        database where it saves a round trip may also find which of ``users`` are limited
        (:mod:`.limit_rows`), their rows locked after the accounts, into ``probe["limited"]``."""
        ...

    def close_bet_rows(self, connection: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
        """Apply ``(state, payout, payout_currency, closed_at, closed_grp, uid)`` to placed bets
        only, and remove them from ``open_bets``; return how many bets changed."""
        ...

    def select_bets(self, connection: Connection, uids: Sequence[int]) -> Iterator[Any]:
        """The bet rows among ``uids``, columns as :data:`ledger.stores.queries.BET_SELECT`."""
        ...

    @property
    def set_based_up_to(self) -> int | None:
        """The most items a set-based close is measured to pay for here (None: no bound)."""
        ...

    def temp_table(
        self, connection: Connection, name: str, columns: Sequence[tuple[str, str]]
    ) -> None:
        """Create the temporary table ``name``, dropped at the end of the transaction at the
        latest; each column ``(name, kind)``, kind ``key`` (the integer primary key), ``int``,
        ``text`` or ``amount`` (an exact integer of any size the store holds)."""
        ...

    def stage(
        self,
        connection: Connection,
        name: str,
        columns: Sequence[tuple[str, str]],
        rows: Iterable[tuple[Any, ...]],
        filled: int | None = None,
    ) -> None:
        """Create the temporary table ``name`` (as :meth:`temp_table`) and load ``rows`` into
        it in bulk (``executemany``, ``COPY``); each row holds the first ``filled`` columns
        (all when ``None``), the others are NULL."""
        ...

    def analyze(self, connection: Connection, names: Sequence[str]) -> None:
        """Give the planner the sizes of freshly loaded temporary tables, where it needs them."""
        ...

    def bet_currencies(self, connection: Connection, uids: Sequence[int]) -> set[str]:
        """The currencies of the recorded bets among ``uids``."""
        ...

    def latest_per(self, table: str, key: str, columns: Sequence[str], order: str) -> str:
        """SQL selecting ``key, *columns`` once per ``key``: those of its row with the
        largest ``order``."""
        ...

    def exact_sum(self, expression: ColumnElement[Any]) -> ColumnElement[Any]:
        """``SUM(expression)`` computed exactly however large the total (never overflowing,
        never through floating point); NULL over no rows, like SQL's ``SUM``."""
        ...
