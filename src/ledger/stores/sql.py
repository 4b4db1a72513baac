"""The SQL store and its unit of work: lifecycle and writes, in SQLAlchemy Core over one schema.

Reads live in :mod:`.queries`, the audit in :mod:`.audit`; what differs between databases
(beginning a transaction, transaction ids, bulk rows, driver errors) is a :class:`.Dialect`,
implemented by :mod:`.sqlite` and :mod:`.postgres`. Everything else is the same SQL on both.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Self

from sqlalchemy import Connection, Engine, literal, select
from sqlalchemy.exc import SQLAlchemyError

from ..domain import Bet, Transaction, account_kind
from ..errors import CapacityExceeded, InsufficientFunds
from . import audit, queries
from .base import AccountBalance, CheckReport, PoolTotals, Retry, StatementRow
from .dialect import Dialect
from .schema import CAPACITY, bets, postings, transactions

__all__ = ["SqlStore", "SqlUnitOfWork"]

BET_COLUMNS = (
    "uid",
    "user_uid",
    "pool_uid",
    "currency",
    "amount",
    "rake",
    "funding",
    "state",
    "payout",
    "payout_currency",
    "ticket",
    "request_uuid",
    "secrets",
    "placed_at",
)
POSTING_COLUMNS = ("txn_id", "account", "currency", "amount", "bet_uid")
TRANSACTION_COLUMNS = ("id", "idempotency_key", "kind", "user_uid", "reference", "created_at")


class SqlStore:
    """A ledger in a SQL database: an engine, its URL, and the database's :class:`.Dialect`."""

    # True when the database admits one writer at a time (SQLite); see ledger.stores.base.Store.
    single_writer: bool = False

    def __init__(self, url: str, engine: Engine, dialect: Dialect) -> None:
        self.url = url
        self.engine = engine
        self.dialect = dialect

    def unit_of_work(self, *, write: bool = True) -> SqlUnitOfWork:
        return SqlUnitOfWork(self, write=write)

    def close(self) -> None:
        self.engine.dispose()

    def replica_lag(self) -> float | None:
        """Seconds this database's data may be behind its primary; ``None`` on a primary."""
        return None

    def migrate(self) -> None:
        from .migrations import upgrade

        with self.translate_errors(), self.engine.begin() as connection:
            upgrade(connection)

    @contextlib.contextmanager
    def translate_errors(self) -> Iterator[None]:
        """Driver errors leave the store only as :class:`~ledger.errors.LedgerError`."""
        try:
            yield
        except SQLAlchemyError as error:
            raise self.dialect.translate(error) from error


class SqlUnitOfWork:
    """One database transaction; see :class:`ledger.stores.base.UnitOfWork`."""

    def __init__(self, store: SqlStore, *, write: bool) -> None:
        self._store = store
        self._dialect = store.dialect
        self._write = write
        self._connection: Connection | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        with self._store.translate_errors():
            self._connection = self._dialect.connect(write=self._write)
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
        with contextlib.suppress(SQLAlchemyError):
            connection.rollback()
        with contextlib.suppress(SQLAlchemyError):
            connection.close()

    @property
    def _conn(self) -> Connection:
        if self._connection is None:
            raise RuntimeError("the unit of work is not open")
        return self._connection

    def commit(self) -> None:
        with self._store.translate_errors():
            self._conn.commit()

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        with self._store.translate_errors():
            nested = self._conn.begin_nested()
        try:
            yield
        except BaseException:
            with self._store.translate_errors():
                nested.rollback()
            raise
        with self._store.translate_errors():
            nested.commit()

    def ping(self) -> None:
        with self._store.translate_errors():
            self._conn.execute(select(literal(1))).scalar_one()

    # --- bets -----------------------------------------------------------------------------------

    def get_bets(self, uids: Sequence[int]) -> dict[int, Bet]:
        with self._store.translate_errors():
            return queries.get_bets(self._conn, self._dialect, uids)

    def add_bets(self, new_bets: Sequence[Bet]) -> None:
        if not new_bets:
            return
        now = self._dialect.timestamp(datetime.now(UTC))
        # Bets of one request share their secrets: serialise them once, not once per bet.
        dumped: dict[int, str] = {}
        rows = []
        # Sorted, so concurrent writers meet unique-index entries in the same order.
        for bet in sorted(new_bets, key=lambda bet: bet.uid):
            secrets = dumped.get(id(bet.secrets))
            if secrets is None:
                secrets = dumped[id(bet.secrets)] = json.dumps(dict(bet.secrets))
            rows.append(
                (
                    bet.uid,
                    bet.user,
                    bet.pool_uid,
                    bet.currency,
                    bet.amount,
                    bet.rake,
                    bet.funding.value,
                    bet.state.value,
                    bet.payout,
                    bet.payout_currency,
                    bet.ticket,
                    bet.request_uuid,
                    secrets,
                    now,
                )
            )
        with self._store.translate_errors():
            self._dialect.insert_rows(self._conn, bets, BET_COLUMNS, rows)

    def close_bets(self, closed: Sequence[Bet]) -> None:
        if not closed:
            return
        now = self._dialect.timestamp(datetime.now(UTC))
        rows = [
            (bet.state.value, bet.payout, bet.payout_currency, now, bet.uid)
            for bet in sorted(closed, key=lambda bet: bet.uid)
        ]
        with self._store.translate_errors():
            changed = self._dialect.close_bet_rows(self._conn, rows)
        if changed != len(rows):
            # Another writer closed one of these bets after we read it (Postgres, READ
            # COMMITTED): run the request again so that it sees that bet's new state.
            raise Retry(f"{len(rows) - changed} bet(s) were closed by a concurrent request")

    # --- transactions ---------------------------------------------------------------------------

    def get_transaction(self, key: str) -> Transaction | None:
        with self._store.translate_errors():
            return queries.get_transaction(self._conn, key)

    def post(self, new_transactions: Sequence[Transaction]) -> None:
        if not new_transactions:
            return
        now = self._dialect.timestamp(datetime.now(UTC))
        deltas: dict[tuple[str, str], int] = defaultdict(int)
        with self._store.translate_errors():
            ids = self._dialect.allocate_transaction_ids(self._conn, len(new_transactions))
            headers = []
            legs = []
            for txn_id, txn in zip(ids, new_transactions, strict=True):
                headers.append((txn_id, txn.key, txn.kind.value, txn.user, txn.reference, now))
                for leg in txn.postings:
                    if not -CAPACITY <= leg.amount <= CAPACITY:
                        # A request's summed house leg: refused before anything is written.
                        raise CapacityExceeded(
                            f"{txn.kind.value}: a {leg.currency} leg on {leg.account} would "
                            f"exceed the {len(str(CAPACITY))} digits a store holds"
                        )
                    legs.append((txn_id, leg.account, leg.currency, leg.amount, leg.bet_uid))
                    deltas[(leg.account, leg.currency)] += leg.amount
            credits: list[tuple[str, str, str, int]] = []
            debits: list[tuple[int, str, str]] = []
            for (name, currency), delta in sorted(deltas.items()):
                kind = account_kind(name)
                if delta < 0 and kind != "house":
                    debits.append((delta, name, currency))
                elif delta:
                    # House accounts may go below zero (prizes, cash): no check needed.
                    credits.append((name, currency, kind, delta))
            # One upsert per account, creating the accounts seen for the first time; it cannot
            # fail for want of funds, so its place in the order does not matter. It is where a
            # balance past the store's capacity is refused (CapacityExceeded, 422): on SQLite
            # before any write, on Postgres by its CHECK, rolling the unit back.
            self._dialect.upsert_balances(self._conn, credits)
            # Postings first, then the transaction rows that seal them: the database checks,
            # when a transaction row arrives (SQLite) or at commit (Postgres), that its postings
            # sum to zero per currency.
            self._dialect.insert_rows(self._conn, postings, POSTING_COLUMNS, legs)
            self._dialect.insert_rows(self._conn, transactions, TRANSACTION_COLUMNS, headers)
            # Debits last, after the idempotency keys are claimed. On Postgres a concurrent
            # writer of the same key (a re-sent withdrawal) then waits on the unique index and
            # fails with a unique violation, which is a Retry that sees the winner's work and
            # answers "unchanged"; debited first, it would fail on the balance the winner had
            # just spent as user.insufficient_funds (a 402) instead.
            self._debit(debits)

    def _debit(self, debits: list[tuple[int, str, str]]) -> None:
        """Apply debits of user balances, refusing any that would go below zero.

        Held money only ever returns what a hold put there, so only available balances can
        really come up short; held ones are checked all the same.
        """
        # Atomic against every other writer, and an overdraft changes no row: conditional
        # updates on Postgres, a read-modify-write under SQLite's one-writer lock.
        if self._dialect.debit_balances(self._conn, debits) == len(debits):
            return
        # Only to name the user in the error (the unit of work is rolled back anyway).
        found = queries.account_balances(self._conn, [(name, cur) for _, name, cur in debits])
        user, currency = next(
            ((name, cur) for delta, name, cur in debits if found.get((name, cur), 0) + delta < 0),
            (debits[0][1], debits[0][2]),
        )
        raise InsufficientFunds(
            f"user {user.removeprefix('user:')} has insufficient {currency} funds"
        )

    # --- reads and the audit --------------------------------------------------------------------

    def account_balances(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        with self._store.translate_errors():
            return queries.account_balances(self._conn, keys)

    def bet_times(self, uid: int) -> tuple[datetime, datetime | None] | None:
        query = select(bets.c.placed_at, bets.c.closed_at).where(bets.c.uid == uid)
        with self._store.translate_errors():
            row = self._conn.execute(query).first()
        return None if row is None else (row.placed_at, row.closed_at)

    def balances(self, user: str) -> list[AccountBalance]:
        with self._store.translate_errors():
            return queries.balances(self._conn, user)

    def statement(
        self, user: str, currency: str | None, limit: int, before: int | None
    ) -> list[StatementRow]:
        with self._store.translate_errors():
            return queries.statement(self._conn, user, currency, limit, before)

    def pool_totals(self, pool_uid: int) -> list[PoolTotals]:
        with self._store.translate_errors():
            return queries.pool_totals(self._conn, self._dialect, pool_uid)

    def check(self) -> CheckReport:
        with self._store.translate_errors():
            return audit.check(self._conn, self._dialect)
