"""The Postgres store (psycopg 3): any number of server replicas on one database.

Correctness never relies on in-process locks: debits are conditional updates (no lost update, no
overdraft), idempotency is unique keys, and a writer that loses a race to a concurrent one
(unique violation, deadlock, serialization failure) gets :class:`~ledger.stores.base.Retry` so
the service re-runs the request and sees the winner's result. Lock and statement timeouts bound
every wait so that an outage answers 503 long before the platform's 2-minute timeout.
"""

from __future__ import annotations

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from ..errors import (
    InsufficientFunds,
    LedgerError,
    SchemaNotReady,
    StoreBusy,
    StoreUnavailable,
    UnbalancedTransaction,
)
from ..migrations import current_revision, head_revision
from .base import Retry
from .sql import SqlStore

__all__ = ["PostgresStore", "normalize_url"]

RETRY_STATES = {"23505", "40001", "40P01"}  # unique violation, serialization, deadlock
BUSY_STATES = {"55P03", "57014"}  # lock_timeout, statement_timeout (query canceled)


def normalize_url(url: str) -> str:
    """``postgres://`` and ``postgresql://`` mean psycopg 3 here."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class PostgresStore(SqlStore):
    """A ledger in a Postgres database."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        lock_timeout: float = 10.0,
        statement_timeout: float = 120.0,
        pool_size: int = 10,
        migrate: bool = False,
    ) -> None:
        self.url = normalize_url(url)
        options = (
            f"-c lock_timeout={int(lock_timeout * 1000)} "
            f"-c statement_timeout={int(statement_timeout * 1000)}"
        )
        self.engine = create_engine(
            make_url(self.url),
            pool_pre_ping=True,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_timeout=connect_timeout * 2,
            connect_args={"connect_timeout": max(1, int(connect_timeout)), "options": options},
        )
        if migrate:
            self.migrate()
        else:
            self._require_schema()

    def _require_schema(self) -> None:
        with self.translate_errors(), self.engine.connect() as connection:
            current = current_revision(connection)
        if current != head_revision():
            raise SchemaNotReady(
                f"the database schema is at {current or 'nothing'}, this code needs "
                f"{head_revision()}: run `ledger db upgrade --db URL`"
            )

    def connect(self, *, write: bool) -> Connection:
        connection = self.engine.connect()
        connection.begin()
        return connection

    def allocate_transaction_ids(self, connection: Connection, count: int) -> list[int]:
        rows = connection.execute(
            text("SELECT nextval('transaction_ids') FROM generate_series(1, :n)"), {"n": count}
        )
        return [row[0] for row in rows]

    def translate(self, error: SQLAlchemyError) -> LedgerError:
        original = getattr(error, "orig", None)
        state = getattr(original, "sqlstate", None) or ""
        message = str(original or error).strip()
        if state in RETRY_STATES:
            return Retry(f"a concurrent writer got there first: {message}")
        if state == "23514":
            if "accounts_no_overdraft" in message:
                return InsufficientFunds("a user balance would go below zero")
            return UnbalancedTransaction(message)
        if state in BUSY_STATES:
            return StoreBusy(f"the database did not answer in time: {message}")
        if state.startswith("23"):
            return LedgerError(f"integrity error: {message}", key="store.integrity")
        if isinstance(error, DBAPIError) and not state:
            # No SQLSTATE: the connection itself failed (refused, reset, timed out).
            return StoreUnavailable(f"the database is unreachable: {message}")
        return StoreUnavailable(f"the database failed ({state}): {message}")
