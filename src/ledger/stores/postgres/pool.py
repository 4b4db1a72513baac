"""The pool's liveness check: a connection is pinged only after sitting idle (HikariCP's rule).

Invariant: a connection idle past the threshold is pinged before it is handed out, and one whose
server went away is replaced, never handed out. Tested by tests/stores/test_postgres_pool.py."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from sqlalchemy import (
    Engine,
)
from sqlalchemy.exc import DisconnectionError

# A pooled connection idle for longer than this is pinged when it is checked out (HikariCP's
# aliveBypassWindowMs, 500 ms by default, is the same rule). SQLAlchemy's pre-ping pinged at
# every checkout: a round trip of the five a batch of Place Bets made, and 6% of the writer
# process's CPU and 5% of its time waiting under (a) (py-spy). A connection used moments ago
# is alive or died with its host since; then its first statement fails, that unit of work
# answers 503 (the platform re-sends) and SQLAlchemy replaces the whole pool.
PING_IDLE = 0.5  # seconds


IDLE_SINCE = "ledger.idle_since"


def fresh(dbapi_connection: Any, record: Any) -> None:
    record.info[IDLE_SINCE] = time.monotonic()


def pinger(engine: Engine) -> Any:
    def ping_if_idle(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get(IDLE_SINCE)
        if since is not None and time.monotonic() - since <= PING_IDLE:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except psycopg.Error as error:
            # The pool discards this connection and checks out another (a new one, if need be).
            raise DisconnectionError(f"a pooled connection is dead: {error}") from error

    return ping_if_idle
