"""The Postgres store (psycopg 3): its engine, pool and start-up checks."""

from __future__ import annotations

from sqlalchemy import (
    create_engine,
)

from ...errors import (
    SchemaNotReady,
)
from .. import revision
from ..sql import SqlStore
from . import temp_buffers
from .dialect import PostgresDialect
from .urls import DEFAULT_PREPARE_THRESHOLD, connection_url, parse_prepare_threshold


class PostgresStore(SqlStore):
    """A ledger in a Postgres database."""

    # Postgres groups concurrent commits itself and lets writers of different rows run at once.
    single_writer = False

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 5.0,
        lock_timeout: float = 10.0,
        statement_timeout: float = 120.0,
        pool_size: int = 10,
        prepare_threshold: int | str | None = DEFAULT_PREPARE_THRESHOLD,
        primary: bool = True,
        migrate: bool = False,
    ) -> None:
        parsed, from_url = connection_url(url, primary=primary)
        if from_url != "default":
            prepare_threshold = from_url
        if isinstance(prepare_threshold, str):
            prepare_threshold = parse_prepare_threshold(prepare_threshold)
        options = (
            f"-c lock_timeout={int(lock_timeout * 1000)} "
            f"-c statement_timeout={int(statement_timeout * 1000)} {temp_buffers.OPTION}"
        )
        # Across a failover: a pooled connection that sat idle is pinged before use and replaced
        # if its host went away (_pinger), and SQLAlchemy invalidates the whole pool on the
        # first disconnect error it sees, so that no connection to the old primary is handed
        # out again; new ones go where libpq finds a host (see connection_url).
        engine = create_engine(
            parsed,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_timeout=connect_timeout * 2,
            connect_args={
                "connect_timeout": max(1, int(connect_timeout)),
                "options": options,
                "prepare_threshold": prepare_threshold,
            },
        )
        super().__init__(
            parsed.render_as_string(hide_password=False), engine, PostgresDialect(engine)
        )
        if migrate:
            self.migrate()
        elif primary:
            # A replica's schema is the primary's (replication copies it), and a replica that is
            # down when the server starts must cost reports only, never the callbacks.
            self._require_schema()

    def replica_lag(self) -> float | None:
        # Nothing left to replay (received == replayed): as fresh as the primary, however long
        # ago its last commit was; else the age of the last transaction replayed.
        with self.translate_errors(), self.engine.connect() as connection:
            lag = connection.exec_driver_sql(
                "SELECT CASE WHEN NOT pg_is_in_recovery() THEN NULL "
                "WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
                "ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END"
            ).scalar()
        return None if lag is None else max(0.0, float(lag))

    def _require_schema(self) -> None:
        with self.translate_errors(), self.engine.connect() as connection:
            current = revision.stored(connection)
        if current != revision.head():
            raise SchemaNotReady(
                f"the database schema is at {current or 'nothing'}, this code needs "
                f"{revision.head()}: run `ledger db upgrade --db URL`"
            )
