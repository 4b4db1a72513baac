"""The Postgres store (psycopg 3): any number of server replicas on one database.

Correctness never relies on in-process locks: debits are conditional updates (no lost update, no
overdraft), idempotency is unique keys, and a writer that loses a race to a concurrent one
(unique violation, deadlock, serialization failure) gets :class:`~ledger.stores.base.Retry` so
the service re-runs the request and sees the winner's result. Lock and statement timeouts bound
every wait so that an outage answers 503 long before the platform's 2-minute timeout.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.types.array import ListBinaryDumper
from sqlalchemy import (
    JSON,
    BigInteger,
    Connection,
    DateTime,
    Engine,
    Integer,
    Table,
    create_engine,
    event,
    func,
    text,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, SQLAlchemyError
from sqlalchemy.sql import ColumnElement

from ..errors import (
    CapacityExceeded,
    InsufficientFunds,
    LedgerError,
    SchemaNotReady,
    StoreBusy,
    StoreUnavailable,
    UnbalancedTransaction,
)
from . import revision
from .base import Retry
from .dialect import BalanceMemo, remembered
from .queries import BET_SELECT
from .schema import CAPACITY, Amount
from .sql import SqlStore

__all__ = ["PostgresDialect", "PostgresStore", "connection_url", "normalize_url"]

BULK_ROWS = 20_000

CLOSE_STATISTICS = 10  # default_statistics_target while a set-based close runs (see stage)
CLOSE_WORK_MEM = "256MB"  # per sort or hash of a set-based close (see PostgresDialect.stage)
# The column types of a set-based close's temporary tables (ledger.stores.closing's kinds).
_TEMP_TYPES = {"key": "bigint", "int": "bigint", "text": "text", "amount": "numeric"}
# Bulk rows travel as arrays in psycopg's binary format (``%b``): the text format quotes and
# escapes every element in Python (a regular expression per value), which cost more client CPU
# per Place Bet than the statements themselves; the ``::type[]`` casts stay, so a value arrives
# as exactly the same SQL value.

# Ids are drawn from their sequences this many at a time and handed out by the process: a group
# of Place Bets needs transaction ids, an event group and delivery ids, each a round trip of its
# own when drawn one group at a time. A sequence value is never given out twice whatever happens
# to the transaction that drew it, so a block outlives the transaction; ids only need to be
# unique (every order is by posting id, time, or uid), and an unused block is a gap, as a
# rolled-back transaction's ids always were.
ID_BLOCK = 1000

RETRY_STATES = {"23505", "40001", "40P01"}  # unique violation, serialization, deadlock
BUSY_STATES = {"55P03", "57014"}  # lock_timeout, statement_timeout (query canceled)
OUT_OF_RANGE = "22003"  # numeric_value_out_of_range


def _array_type(column_type: Any) -> str:
    if isinstance(column_type, Amount):
        return "numeric"
    if isinstance(column_type, BigInteger | Integer):
        return "bigint"
    if isinstance(column_type, DateTime):
        return "timestamptz"
    return "text"  # strings, and JSON sent as text and cast per row


class _Array(list[Any]):
    """A bulk column sent as a Postgres array whose element type the class says.

    For a plain list psycopg finds the element type by looking at every element, twice per
    list (the dumper's key, then its upgrade), and for integers at the largest and smallest
    too: a fifth of the group-commit writer's CPU under (a), more than dumping the values. A
    list of one of these classes has its array type registered (below): nothing is looked at.
    """


class _Bigints(_Array):
    pass


class _Texts(_Array):
    pass


class _Numerics(_Array):
    """Python ints (or Decimals) as ``numeric``: exact at any size the store holds."""


class _Times(_Array):
    pass


_ARRAYS: dict[str, type[_Array]] = {
    "bigint": _Bigints,
    "text": _Texts,
    "numeric": _Numerics,
    "timestamptz": _Times,
}
for _name, _class in _ARRAYS.items():
    _info = psycopg.postgres.types["int8" if _name == "bigint" else _name]
    psycopg.adapters.register_dumper(
        _class,
        type(
            f"{_class.__name__}Dumper",
            (ListBinaryDumper,),
            {"oid": _info.array_oid, "element_oid": _info.oid},
        ),
    )


# libpq's own host list, ``postgresql://user@h1:5432,h2:5432/db``: SQLAlchemy's URL parser reads
# one host and one port, so the list becomes its multi-host form (``?host=h1:5432&host=h2:5432``).
_HOST_LIST = re.compile(
    r"^(?P<scheme>[^:/?#]+)://(?P<user>[^@/?#]*@)?(?P<hosts>[^/?#]*,[^/?#]*)(?P<rest>[/?].*)?$"
)

# What psycopg does with a statement it has run this many times on one connection: prepare it
# server-side. ``None`` never prepares, which pgbouncer in transaction mode needs (a prepared
# statement lives on one server connection, the next transaction may get another).
DEFAULT_PREPARE_THRESHOLD = 5


def normalize_url(url: str) -> str:
    """One SQLAlchemy URL for psycopg 3 from any of the forms an operator may write.

    ``postgres://`` and ``postgresql://`` mean psycopg 3; libpq's host list
    (``postgresql://user@h1:5432,h2:5432/db``) becomes SQLAlchemy's multi-host form
    (``postgresql+psycopg://user@/db?host=h1:5432&host=h2:5432``); libpq's own comma-separated
    ``?host=h1,h2&port=5432,5433`` passes through unchanged, as psycopg reads it directly.
    """
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix) :]
    found = _HOST_LIST.match(url)
    if found is None:
        return url
    path, _, query = (found["rest"] or "/").partition("?")
    hosts = [f"host={quote(host, safe=':[]')}" for host in found["hosts"].split(",") if host]
    return f"{found['scheme']}://{found['user'] or ''}{path or '/'}?" + "&".join(
        [*hosts, *([query] if query else [])]
    )


def host_count(url: URL) -> int:
    """How many hosts the URL names (SQLAlchemy's repeated ``host=`` or libpq's ``h1,h2``)."""
    named = url.query.get("host", ())
    hosts = [named] if isinstance(named, str) else list(named)
    if url.host:
        hosts.append(url.host)
    return sum(len([part for part in host.split(",") if part]) for host in hosts)


def parse_prepare_threshold(text: str | None) -> int | None:
    """``none`` (never prepare server-side, for pgbouncer in transaction mode) or a count."""
    if text is None:
        return DEFAULT_PREPARE_THRESHOLD
    if text.strip().lower() in ("none", "off", "never"):
        return None
    count = int(text)
    if count < 0:
        raise ValueError("prepare_threshold must be >= 0 or none")
    return count


def connection_url(url: str, *, primary: bool) -> tuple[URL, int | str | None]:
    """The engine's URL and the URL's ``prepare_threshold`` (taken out of its query), if any.

    ``?prepare_threshold=none`` in the URL itself lets one URL carry everything a connection
    through pgbouncer needs (libpq would refuse the parameter, so it never reaches libpq).

    A primary URL that names several hosts and no ``target_session_attrs`` gets ``read-write``:
    libpq then tries the hosts in turn and keeps only the one that accepts writes, so that after
    a failover every new connection lands on the promoted standby, never on a read-only host.
    """
    parsed = make_url(normalize_url(url))
    given = _single(parsed.query.get("prepare_threshold"))
    threshold: int | str | None = "default" if given is None else parse_prepare_threshold(given)
    parsed = parsed.difference_update_query(["prepare_threshold"])
    if primary and host_count(parsed) > 1 and "target_session_attrs" not in parsed.query:
        parsed = parsed.update_query_dict({"target_session_attrs": "read-write"})
    return parsed, threshold


def _single(value: str | tuple[str, ...] | None) -> str | None:
    if isinstance(value, tuple):
        return value[-1] if value else None
    return value


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
            f"-c statement_timeout={int(statement_timeout * 1000)}"
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


class PostgresDialect:
    """The :class:`~ledger.stores.dialect.Dialect` of Postgres (psycopg 3)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._ids = {
            name: _IdBlock(name) for name in ("transaction_ids", "delivery_ids", "event_groups")
        }
        _listen(engine)

    def connect(self, *, write: bool, bulk: bool = False) -> Connection:
        connection = self._engine.connect()
        connection.begin()
        return connection

    def run(self, connection: Connection, sql: str, parameters: Sequence[Any] = ()) -> Any:
        # With whatever is queued, in one round trip (the counter's update: with SET CONSTRAINTS).
        return _run(connection, sql, tuple(parameters))

    def release(self, connection: Connection) -> None:
        return None  # Postgres locks rows, and its locks end with the transaction

    def defer_checkpoint(self, connection: Connection) -> None:
        return None  # the checkpointer process copies the log, never a commit

    def resume_checkpoints(self, connection: Connection, committed: bool) -> None:
        return None

    def committed(self, connection: Connection) -> None:
        return None

    def allocate_transaction_ids(self, connection: Connection, count: int) -> list[int]:
        return self._ids["transaction_ids"].take(connection, count)

    def allocate_delivery_ids(self, connection: Connection, count: int) -> list[int]:
        return self._ids["delivery_ids"].take(connection, count)

    def check_deferred(self, connection: Connection) -> None:
        # The postings' check of their transactions (migration 0017) is deferred to commit: run
        # it before the counter's lock (queued: sent just before the counter's update, which
        # follows at once), so that nothing waits on that lock while it runs.
        _defer(connection, "SET CONSTRAINTS ALL IMMEDIATE", None)

    def allocate_event_group(self, connection: Connection) -> int:
        return self._ids["event_groups"].take(connection, 1)[0]

    def seal_events(self, connection: Connection, grp: int, count: int, at: datetime) -> None:
        # One statement, nothing read back: queued, it goes with the COMMIT that follows, one
        # round trip for both (the counter's lock is then held for no more than the commit).
        _defer(connection, _SEAL, (count, grp, count, at))

    def send_queued(self, connection: Connection) -> None:
        _run(connection, None, None)

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
        if not rows:
            return
        sql, kinds = _insert_sql(table, tuple(columns), ignore_conflicts, upsert)
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            arrays = _columns(chunk, kinds)
            if len(chunk) <= DEFERRED_ROWS:
                # Nothing reads its outcome: sent with the next statement that needs an answer.
                _defer(connection, sql, arrays)
            else:
                _run(connection, sql, arrays)

    # The memo (ledger.stores.dialect.BalanceMemo) holds, on Postgres, only balances this
    # transaction has locked (lock_balances, bets_and_balances, the upsert's RETURNING) and
    # kept current since: no other writer can change them before commit. When it knows every
    # account a write touches, the write needs no answer from the database and is queued with
    # the next statement that does (one round trip a batch for all of a group's writes);
    # otherwise it is the statement it always was, and the memo forgets what it cannot follow.

    def debit_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[int, str, str]],
        memo: BalanceMemo | None = None,
    ) -> int:
        if rows and _knows(memo, [(name, currency) for _, name, currency in rows]):
            assert memo is not None
            return _debit_locked(connection, rows, memo)
        changed = 0
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            result = _run(
                connection,
                "UPDATE accounts a SET balance = a.balance + v.delta "
                "FROM unnest(%b::numeric[], %b::text[], %b::text[]) AS v(delta, name, currency) "
                "WHERE a.name = v.name AND a.currency = v.currency AND a.balance + v.delta >= 0",
                _columns(chunk, _DELTAS),
                lookup=True,
            )
            changed += int(result.rowcount)
        if memo is not None:
            for _, name, currency in rows:
                memo.pop((name, currency), None)
        return changed

    def upsert_balances(
        self,
        connection: Connection,
        rows: Sequence[tuple[str, str, str, int]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        if rows and _knows(memo, [(name, currency) for name, currency, _, _ in rows]):
            assert memo is not None
            return _credit_locked(connection, rows, memo)
        after: dict[tuple[str, str], int] = {}
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            # RETURNING: the balance this statement left, under the row lock it holds until
            # commit: exact whatever other writers do meanwhile.
            result = _run(
                connection,
                "INSERT INTO accounts (name, currency, kind, balance) "
                "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::numeric[]) "
                "ON CONFLICT (name, currency) DO UPDATE "
                "SET balance = accounts.balance + excluded.balance "
                "RETURNING name, currency, balance",
                _columns(chunk, _ACCOUNTS),
            )
            for name, currency, balance in result.fetchall():
                after[(name, currency)] = int(balance)
        if memo is not None:
            memo.update(after)
        return after

    def read_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        return _balances(connection, keys, "")

    def lock_balances(
        self,
        connection: Connection,
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> dict[tuple[str, str], int]:
        if keys and _knows(memo, keys):
            assert memo is not None
            return remembered(memo, keys)
        # Locked in key order, like every other writer's: no deadlock between two of them.
        found = _balances(connection, keys, _LOCKING)
        if memo is not None:
            memo.update((key, found.get(key)) for key in keys)
        return found

    def bets_and_balances(
        self,
        connection: Connection,
        uids: Sequence[int],
        keys: Sequence[tuple[str, str]],
        memo: BalanceMemo | None = None,
    ) -> tuple[list[Any], dict[tuple[str, str], int]]:
        # The accounts locked first, then the bets read. In that order: a statement sees what
        # committed before it began, so a concurrent writer of the same request, whose commit
        # the lock waited for, has its bets seen here and the request is answered as the
        # repeat it is, never refused for the funds the first one spent.
        if len(uids) > BULK_ROWS or len(keys) > BULK_ROWS or not keys:
            balances = self.lock_balances(connection, keys, memo)
            return list(self.select_bets(connection, uids)), balances
        # One round trip, with whatever is queued (and the transaction's BEGIN).
        locked, found = _run_many(
            connection, [(_BALANCES + _LOCKING, _columns(keys, _KEYS)), (_BETS, (_Bigints(uids),))]
        )
        balances = {(name, currency): int(balance) for name, currency, balance in locked}
        if memo is not None:
            memo.update((key, balances.get(key)) for key in keys)
        return found.fetchall(), balances

    def close_bet_rows(self, connection: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
        changed = 0
        for start in range(0, len(rows), BULK_ROWS):
            chunk = rows[start : start + BULK_ROWS]
            result = connection.exec_driver_sql(
                "UPDATE bets b SET state = v.state, payout = v.payout, "
                "payout_currency = v.payout_currency, closed_at = v.closed_at "
                "FROM unnest(%s::text[], %s::numeric[], %s::text[], %s::timestamptz[], "
                "%s::bigint[]) AS v(state, payout, payout_currency, closed_at, uid) "
                "WHERE b.uid = v.uid AND b.state = 'placed'",
                _columns(chunk),
            )
            changed += int(result.rowcount)
            _defer(
                connection,
                "DELETE FROM open_bets WHERE uid = ANY(%s::bigint[])",
                ([row[-1] for row in chunk],),
            )
        return changed

    def select_bets(self, connection: Connection, uids: Sequence[int]) -> Iterator[Any]:
        for start in range(0, len(uids), BULK_ROWS):
            chunk = list(uids[start : start + BULK_ROWS])
            yield from _run(connection, _BETS, (_Bigints(chunk),), lookup=True).fetchall()

    def timestamp(self, moment: datetime) -> Any:
        return moment

    distinct_from = "IS DISTINCT FROM"

    # No bound: the 503 a set-based settle of 1,000,000 once answered was its statement
    # timeout, on a NOT IN that Postgres no longer hashed past work_mem (closing.write now
    # uses an anti-join); the set-based close is the faster path at every size measured.
    set_based_up_to = None

    def minute(self, timestamp: str) -> str:
        return f"date_trunc('minute', {timestamp})"

    def temp_table(
        self, connection: Connection, name: str, columns: Sequence[tuple[str, str]]
    ) -> None:
        # No index, not even on a key: the close joins its analysed temporary tables by hash,
        # and a primary key cost an index insertion per row (a million-item settle: 3.3 s of
        # the server's CPU for close_first alone, 0.6 s without; staging 4.1 s, 1.8 s without).
        # Text compares byte by byte, as the key columns it is joined with (migration 0015):
        # the close's sorts and groupings of a million account names use memcmp, not strcoll.
        body = ", ".join(
            f"{column} {_TEMP_TYPES[kind]}" + (' COLLATE "C"' if kind == "text" else "")
            for column, kind in columns
        )
        connection.exec_driver_sql(f"CREATE TEMP TABLE {name} ({body}) ON COMMIT DROP")

    def stage(
        self,
        connection: Connection,
        name: str,
        columns: Sequence[tuple[str, str]],
        rows: Iterable[tuple[Any, ...]],
        filled: int | None = None,
    ) -> None:
        # For this transaction only: the close's hashes, sorts and windows over every item
        # (and the bets trigger's transition tables) in memory, not in batches spilled to
        # disk as the default 4 MB makes them at a million items.
        connection.exec_driver_sql(f"SET LOCAL work_mem = '{CLOSE_WORK_MEM}'")
        # And their statistics from a sample of 3,000 rows, not 30,000: the planner needs their
        # sizes and that their keys are distinct, which a small sample tells as well. The four
        # ANALYZEs of a 100,000-item settle: 0.18 -> 0.04 s of the server's time (0.43 s at a
        # million), the plans the same (benchmarks/settle_split.py, EXPLAIN).
        connection.exec_driver_sql(f"SET LOCAL default_statistics_target = {CLOSE_STATISTICS}")
        self.temp_table(connection, name, columns)
        # COPY through the driver's own connection: the rows stream in one round trip, without
        # a statement per chunk or Python-side arrays. In the binary format: no integer turned
        # into text and no text scanned for characters to escape, in Python's process, and
        # none parsed back by the server (a million items: the ledger's CPU for staging 1.42
        # and 1.69 s in text, 1.04 and 1.03 s in binary, the server's about the same).
        driver = connection.connection.driver_connection
        assert driver is not None
        _run(connection, None, None)  # COPY cannot be pipelined: what waits goes first
        staged = columns[:filled]
        names = ", ".join(column for column, _ in staged)
        statement = f"COPY {name} ({names}) FROM STDIN (FORMAT BINARY)"
        try:
            with driver.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types([_TEMP_TYPES[kind] for _, kind in staged])
                for row in rows:
                    copy.write_row(row)
        except psycopg.Error as error:
            # On the driver's connection, past SQLAlchemy: its errors come out as SQLAlchemy's
            # (as _run's do), so that the store translates them (a lost connection: 503).
            raise DBAPIError.instance(statement, None, error, psycopg.Error) from error

    def analyze(self, connection: Connection, names: Sequence[str]) -> None:
        # Temporary tables have no statistics until analysed: the planner would take a million
        # staged rows for a few hundred and join them with nested loops.
        for name in names:
            connection.exec_driver_sql(f"ANALYZE {name}")

    def latest_per(self, table: str, key: str, columns: Sequence[str], order: str) -> str:
        names = ", ".join(columns)
        return (
            f"SELECT DISTINCT ON ({key}) {key}, {names} FROM {table} "  # noqa: S608 - code's names
            f"ORDER BY {key}, {order} DESC"
        )

    def bet_currencies(self, connection: Connection, uids: Sequence[int]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(uids), BULK_ROWS):
            chunk = list(uids[start : start + BULK_ROWS])
            result = connection.exec_driver_sql(
                "SELECT DISTINCT currency FROM bets WHERE uid = ANY(%s::bigint[])", (chunk,)
            )
            found.update(row[0] for row in result)
        return found

    def exact_sum(self, expression: ColumnElement[Any]) -> ColumnElement[Any]:
        return func.sum(expression)

    def translate(self, error: SQLAlchemyError) -> LedgerError:
        for block in self._ids.values():
            # After a failover, ids drawn from the old primary may not have reached the new one,
            # which could then hand them out again: any database error starts fresh blocks.
            block.forget()
        original = getattr(error, "orig", None)
        state = getattr(original, "sqlstate", None) or ""
        message = str(original or error).strip()
        if state in RETRY_STATES:
            return Retry(f"a concurrent writer got there first: {message}")
        if state == OUT_OF_RANGE or (state == "23514" and "_exact" in message):
            # A balance or a sum past 38 digits (the <table>_<column>_exact CHECKs); the
            # transaction rolls back with nothing written, and the same request would fail the
            # same way again: 422, not a retryable 503.
            return CapacityExceeded(f"beyond the 38 digits the store holds: {message}")
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


# --- statements sent together -------------------------------------------------------------------
#
# A group of Place Bets writes a dozen tables; a round trip each cost more CPU, on both sides of
# the socket, than the rows themselves (a wake-up of the backend and of the writer per
# statement). Statements whose outcome nobody reads (bulk inserts without RETURNING, the
# deferred checks) are therefore queued on the connection and sent, in psycopg's pipeline mode,
# together with the next statement that needs an answer: a failure surfaces there, inside the
# same savepoint or transaction, which rolls back as it would have (a savepoint sends the queue
# before it is released: ``send_queued``, called by the unit of work). Every statement issued
# through SQLAlchemy on that connection sends the queue first (``before_cursor_execute``), so
# the order of the statements never changes; a commit sends it with the COMMIT, and a rollback
# (of the transaction or of a savepoint, which never has older statements queued: opening it
# sent them) drops it unsent.

DEFERRED_ROWS = 1_000  # larger bulk inserts go at once: their arrays are not kept waiting
_PENDING = "ledger.pending"  # the queue, in the pooled connection's info dictionary

# Each queued statement with psycopg's ``prepare`` (False: a lookup, see _run).
_Queue = list[tuple[str, Any, bool | None]]


def _queue(connection: Connection) -> _Queue:
    pending: _Queue = connection.info.setdefault(_PENDING, [])
    return pending


def _defer(connection: Connection, sql: str, params: Any, *, lookup: bool = False) -> None:
    _queue(connection).append((sql, params, False if lookup else None))


def _run(connection: Connection, sql: str | None, params: Any, *, lookup: bool = False) -> Any:
    """Send the queued statements, then ``sql`` (if any), in one round trip; ``sql``'s cursor.

    A ``lookup`` (rows by key) is planned on every execution, never prepared: a prepared
    statement keeps the generic plan it got while its table was small (a sequential scan)
    until the table's statistics change, and a fresh ledger's tables grow from nothing under
    load; planned with the keys in hand, it reads the primary key's index. Driver errors come
    out as SQLAlchemy's (``DBAPIError``), as from ``exec_driver_sql``.
    """
    prepare = False if lookup else None
    pending = connection.info.get(_PENDING)
    if not pending and sql is None:
        return None
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        cursor = driver.cursor()
        if not pending:
            cursor.execute(sql, params, prepare=prepare)
            return cursor
        with _pipeline(connection, driver, pending):
            if sql is not None:
                cursor.execute(sql, params, prepare=prepare)
        return cursor
    except psycopg.Error as error:
        raise DBAPIError.instance(sql, params, error, psycopg.Error) from error


def _run_many(connection: Connection, statements: Sequence[tuple[str, Any]]) -> list[Any]:
    """Send the queued statements, then each of ``statements`` (lookups, see :func:`_run`), in
    one round trip; their cursors, in order."""
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        cursors = []
        with _pipeline(connection, driver, connection.info.get(_PENDING) or []):
            for sql, params in statements:
                cursor = driver.cursor()
                cursor.execute(sql, params, prepare=False)
                cursors.append(cursor)
        return cursors
    except psycopg.Error as error:
        raise DBAPIError.instance(statements[0][0], None, error, psycopg.Error) from error


@contextlib.contextmanager
def _pipeline(connection: Connection, driver: Any, pending: _Queue) -> Iterator[None]:
    """A pipeline that sends ``pending`` first; leaving it waits for every result and raises
    the first failure."""
    connection.info[_PENDING] = []
    queued = driver.cursor()
    with driver.pipeline():
        for statement, values, prepare in pending:
            queued.execute(statement, values, prepare=prepare)
        yield
    queued.close()


def _send_queued(connection: Connection, *_: Any) -> None:
    _run(connection, None, None)


def _commit_queued(connection: Connection) -> None:
    """Before a commit: the queued statements and the COMMIT itself in one round trip (the
    driver's own commit that follows finds the transaction ended, and does nothing)."""
    pending = connection.info.get(_PENDING)
    if not pending:
        return
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        with _pipeline(connection, driver, pending):
            driver.commit()
    except psycopg.Error as error:
        raise DBAPIError.instance("COMMIT", None, error, psycopg.Error) from error


def _drop_queued(connection: Connection, *_: Any) -> None:
    connection.info.pop(_PENDING, None)


def _drop_on_checkin(dbapi_connection: Any, record: Any) -> None:
    if record is not None:
        record.info.pop(_PENDING, None)
        record.info[_IDLE_SINCE] = time.monotonic()


# A pooled connection idle for longer than this is pinged when it is checked out (HikariCP's
# aliveBypassWindowMs, 500 ms by default, is the same rule). SQLAlchemy's pre-ping pinged at
# every checkout: a round trip of the five a batch of Place Bets made, and 6% of the writer
# process's CPU and 5% of its time waiting under (a) (py-spy). A connection used moments ago
# is alive or died with its host since; then its first statement fails, that unit of work
# answers 503 (the platform re-sends) and SQLAlchemy replaces the whole pool.
PING_IDLE = 0.5  # seconds
_IDLE_SINCE = "ledger.idle_since"


def _fresh(dbapi_connection: Any, record: Any) -> None:
    record.info[_IDLE_SINCE] = time.monotonic()


def _pinger(engine: Engine) -> Any:
    def ping_if_idle(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is not None and time.monotonic() - since <= PING_IDLE:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except psycopg.Error as error:
            # The pool discards this connection and checks out another (a new one, if need be).
            raise DisconnectionError(f"a pooled connection is dead: {error}") from error

    return ping_if_idle


def _listen(engine: Engine) -> None:
    event.listen(engine, "before_cursor_execute", _send_queued)
    event.listen(engine, "commit", _commit_queued)
    event.listen(engine, "rollback", _drop_queued)
    event.listen(engine, "rollback_savepoint", _drop_queued)
    event.listen(engine.pool, "checkin", _drop_on_checkin)
    event.listen(engine.pool, "connect", _fresh)
    event.listen(engine.pool, "checkout", _pinger(engine))


_INSERTS: dict[
    tuple[str, tuple[str, ...], bool, str | None], tuple[str, tuple[type[_Array], ...]]
] = {}


def _insert_sql(
    table: Table, columns: tuple[str, ...], ignore_conflicts: bool, upsert: str | None
) -> tuple[str, tuple[type[_Array], ...]]:
    """One INSERT ... SELECT FROM unnest(arrays): a single statement for tens of thousands of
    rows, whose statement-level triggers fire once; built once per shape, with the array
    class of each column."""
    key = (table.name, columns, ignore_conflicts, upsert)
    found = _INSERTS.get(key)
    if found is None:
        types = [_array_type(table.c[name].type) for name in columns]
        arrays = ", ".join(f"%b::{kind}[]" for kind in types)
        values = ", ".join(
            f"v.{name}::json" if isinstance(table.c[name].type, JSON) else f"v.{name}"
            for name in columns
        )
        names = ", ".join(columns)
        conflict = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
        if upsert is not None:
            conflict = f" {upsert}"
        sql = (
            f"INSERT INTO {table.name} ({names}) SELECT {values} "  # noqa: S608
            f"FROM unnest({arrays}) AS v({names}){conflict}"
        )
        found = _INSERTS[key] = (sql, tuple(_ARRAYS[kind] for kind in types))
    return found


_BETS = f"SELECT {BET_SELECT} FROM bets WHERE uid = ANY(%b::bigint[])"  # noqa: S608
_BALANCES = (
    "SELECT a.name, a.currency, a.balance FROM accounts a "
    "JOIN unnest(%b::text[], %b::text[]) AS v(name, currency) "
    "ON a.name = v.name AND a.currency = v.currency"
)
_LOCKING = " ORDER BY a.name, a.currency FOR UPDATE OF a"
# Adds each delta: with the rows locked the result is what the memo says, and were it not, the
# balance would still be right (only a posting's running balance wrong, which the audit finds);
# the accounts_no_overdraft CHECK still refuses a user balance below zero.
_ADD = (
    "UPDATE accounts a SET balance = a.balance + v.delta "
    "FROM unnest(%b::numeric[], %b::text[], %b::text[]) AS v(delta, name, currency) "
    "WHERE a.name = v.name AND a.currency = v.currency"
)
# No ON CONFLICT: an account known missing under this transaction's lock that another writer
# created meanwhile fails here on its key (a Retry, which reads it again), never added to.
_CREATE = (
    "INSERT INTO accounts (name, currency, kind, balance) "
    "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::numeric[])"
)
# The event feed's seal (ledger.stores.events) in one statement: the counter's row updated
# (created by the first writer of a schema made without it), its new value giving the group's
# ids. Parameters: count, grp, count, committed_at.
_SEAL = (
    "WITH taken AS (INSERT INTO event_counter (id, last_id) VALUES (1, %s) "
    "ON CONFLICT (id) DO UPDATE SET last_id = event_counter.last_id + excluded.last_id "
    "RETURNING last_id) "
    "INSERT INTO event_commits (grp, first_id, last_id, committed_at) "
    "SELECT %s, last_id - %s + 1, last_id, %s FROM taken"
)


# The arrays of the statements above: (name, currency) keys; (delta, name, currency) changes;
# (name, currency, kind, balance) accounts.
_KEYS = (_Texts, _Texts)
_DELTAS = (_Numerics, _Texts, _Texts)
_ACCOUNTS = (_Texts, _Texts, _Texts, _Numerics)


def _columns(
    rows: Sequence[tuple[Any, ...]], kinds: Sequence[type[_Array]] | None = None
) -> tuple[list[Any], ...]:
    """The columns of ``rows``, each an array of its ``kinds`` (or a plain list, its element
    type then found by psycopg)."""
    columns = zip(*rows, strict=True)
    if kinds is None:
        return tuple(list(column) for column in columns)
    return tuple(kind(column) for kind, column in zip(kinds, columns, strict=True))


def _balances(
    connection: Connection, keys: Sequence[tuple[str, str]], locking: str
) -> dict[tuple[str, str], int]:
    """The balances of the ``(name, currency)`` accounts that exist (``locking``: the clause
    that locks them), looked up by key on the driver's connection."""
    found: dict[tuple[str, str], int] = {}
    for start in range(0, len(keys), BULK_ROWS):
        chunk = keys[start : start + BULK_ROWS]
        result = _run(connection, _BALANCES + locking, _columns(chunk, _KEYS), lookup=True)
        for name, currency, balance in result.fetchall():
            found[(name, currency)] = int(balance)
    return found


def _knows(memo: BalanceMemo | None, keys: Iterable[tuple[str, str]]) -> bool:
    return memo is not None and all(key in memo for key in keys)


def _credit_locked(
    connection: Connection, rows: Sequence[tuple[str, str, str, int]], memo: BalanceMemo
) -> dict[tuple[str, str], int]:
    """upsert_balances of accounts whose balances this transaction holds locked (``memo``):
    the balances it leaves computed here, the writes queued."""
    after: dict[tuple[str, str], int] = {}
    added, created = [], []
    for name, currency, kind, delta in rows:
        before = memo[(name, currency)]
        balance = (before or 0) + delta
        if not -CAPACITY <= balance <= CAPACITY:
            # Before anything of post() is written, as on SQLite.
            raise CapacityExceeded(
                f"{name} {currency}: a balance beyond the {len(str(CAPACITY))} digits a store holds"
            )
        after[(name, currency)] = balance
        if before is None:
            created.append((name, currency, kind, delta))
        else:
            added.append((delta, name, currency))
    if added:
        _defer(connection, _ADD, _columns(added, _DELTAS), lookup=True)
    if created:
        _defer(connection, _CREATE, _columns(created, _ACCOUNTS))
    memo.update(after)
    return after


def _debit_locked(
    connection: Connection, rows: Sequence[tuple[int, str, str]], memo: BalanceMemo
) -> int:
    """debit_balances of accounts whose balances this transaction holds locked (``memo``):
    all of them queued, or (one would go below zero, or does not exist) none, and how many
    could have been."""
    after: dict[tuple[str, str], int] = {}
    for delta, name, currency in rows:
        balance = memo[(name, currency)]
        if balance is not None and balance + delta >= 0:
            after[(name, currency)] = balance + delta
    if len(after) == len(rows):
        _defer(connection, _ADD, _columns(rows, _DELTAS), lookup=True)
        memo.update(after)
    return len(after)


class _IdBlock:
    """Ids of one sequence, drawn ``ID_BLOCK`` at a time and handed out by this process."""

    def __init__(self, sequence: str) -> None:
        self._sequence = sequence
        self._free: list[int] = []
        self._lock = threading.Lock()  # the group-commit writer and the direct writers share it

    def take(self, connection: Connection, count: int) -> list[int]:
        with self._lock:
            if len(self._free) < count:
                wanted = count - len(self._free) + ID_BLOCK
                self._free += _next_ids(connection, self._sequence, wanted)
            taken = self._free[:count]
            del self._free[:count]
        return taken

    def forget(self) -> None:
        with self._lock:
            self._free = []


def _next_ids(connection: Connection, sequence: str, count: int) -> list[int]:
    rows = connection.execute(
        text(f"SELECT nextval('{sequence}') FROM generate_series(1, :n)"),  # noqa: S608
        {"n": count},
    )
    return [row[0] for row in rows]
