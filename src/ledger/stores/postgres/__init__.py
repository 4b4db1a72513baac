"""The Postgres store (psycopg 3): any number of server replicas on one database.

Correctness never relies on in-process locks: debits are conditional updates (no lost update, no
overdraft), idempotency is unique keys, and a writer that loses a race to a concurrent one
(unique violation, deadlock, serialization failure) gets :class:`~ledger.stores.base.Retry` so
the service re-runs the request and sees the winner's result. Lock and statement timeouts bound
every wait so that an outage answers 503 long before the platform's 2-minute timeout.
"""

from __future__ import annotations

from .arrays import BULK_ROWS
from .dialect import CLOSE_WORK_MEM, PostgresDialect
from .ids import ID_BLOCK
from .store import PostgresStore
from .urls import (
    DEFAULT_PREPARE_THRESHOLD,
    connection_url,
    host_count,
    normalize_url,
    parse_prepare_threshold,
)

__all__ = [
    "BULK_ROWS",
    "CLOSE_WORK_MEM",
    "DEFAULT_PREPARE_THRESHOLD",
    "ID_BLOCK",
    "PostgresDialect",
    "PostgresStore",
    "connection_url",
    "host_count",
    "normalize_url",
    "parse_prepare_threshold",
]
