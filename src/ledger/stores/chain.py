"""The journal's chain in SQL: a commit's content read back from its rows, its record appended
under the head row's lock, and the records read in order (ledger.integrity.canonical says what
the bytes are; docs/integrity.md says it for an independent implementation).

Invariant: a unit of work that leaves transactions or bets written appends one record, as its
last statements before COMMIT and after the event feed's seal (:mod:`.events`), so records
follow commit order: the ``journal_head`` row's lock (Postgres) is held from its update to the
commit, and SQLite has one writer. The content is computed from the rows the unit of work wrote
(those naming its group) before any lock is taken: on SQLite by :func:`commit_content`'s
queries, the ones ``ledger verify`` runs, so what is sealed is exactly what a verifier reads;
on Postgres by the same bytes built in SQL (:mod:`.postgres.content`), which every verify checks
against these queries. Nothing prunable (events, deliveries) is read.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Text,
    bindparam,
    func,
    insert,
    select,
    type_coerce,
    update,
)
from sqlalchemy.engine import Dialect as SqlDialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from ..integrity.canonical import (
    GENESIS,
    RECORD_PREFIX,
    Content,
    micros,
    record_hash,
)
from .chain_tables import bet_closes, journal_chain, journal_head
from .dialect import Dialect
from .schema import bets, postings, transactions

__all__ = [
    "ONE_STATEMENT",
    "ChainRecord",
    "commit_content",
    "content_of_pages",
    "driver_pages",
    "head",
    "one_statement_parameters",
    "plain_queries",
    "record_of",
    "records",
    "row_sql",
    "seal_in_steps",
    "seal_plain",
    "size",
]

# Postgres: the head moved on and the record inserted in one statement, the content's hash
# and row count read from the setting the content's statement left
# (ledger.stores.postgres.content), the record's hash computed by the database (sha256 of the
# leaf prefix and the record's bytes, as ledger.integrity.canonical.record_hash): queued with
# the COMMIT, no round trip while the head's lock is held. No record when the commit's rows
# came to none (every command of its batch refused). Every expression in SET reads the head's
# old values.
ONE_STATEMENT = (
    "WITH c AS (SELECT decode(split_part(v, ':', 1), 'hex') AS digest, "
    "split_part(v, ':', 2)::bigint AS n "
    "FROM (SELECT current_setting('ledger.chain_content') AS v) AS setting), "
    "h AS (UPDATE journal_head SET seq = seq + 1, prev_hash = record_hash, "
    "record_hash = encode(sha256('\\x00'::bytea || %s::bytea || int8send(seq + 1) "
    "|| decode(record_hash, 'hex') || c.digest || int8send(%s::bigint)), 'hex') "
    "FROM c WHERE id = 1 AND c.n > 0 RETURNING seq, prev_hash, record_hash, c.digest, c.n) "
    "INSERT INTO journal_chain "
    "(seq, grp, prev_hash, content_hash, record_hash, committed_at, row_count) "
    "SELECT seq, %s, prev_hash, encode(digest, 'hex'), record_hash, %s, n FROM h"
)

_PAGE = 10_000

TRANSACTION_FIELDS = (
    transactions.c.id,
    transactions.c.idempotency_key,
    transactions.c.kind,
    transactions.c.user_uid,
    transactions.c.reference,
    transactions.c.created_at,
)
POSTING_FIELDS = (
    postings.c.id,
    postings.c.txn_id,
    postings.c.account,
    postings.c.currency,
    postings.c.amount,
    postings.c.bet_uid,
    postings.c.balance_after,
)
PLACED_FIELDS = (
    bets.c.uid,
    bets.c.user_uid,
    bets.c.pool_uid,
    bets.c.currency,
    bets.c.amount,
    bets.c.rake,
    bets.c.funding,
    bets.c.ticket,
    bets.c.request_uuid,
    bets.c.placed_at,
)
CLOSED_FIELDS = (
    bets.c.uid,
    bets.c.state,
    bets.c.payout,
    bets.c.payout_currency,
    bets.c.closed_at,
)


@dataclass(frozen=True, slots=True)
class ChainRecord:
    """One stored record of the chain."""

    seq: int
    grp: int | None
    prev_hash: bytes
    content_hash: bytes
    record_hash: bytes
    committed_at: datetime
    row_count: int


def _of(column: Any, grp: int | None) -> ColumnElement[bool]:
    result: ColumnElement[bool] = column.is_(None) if grp is None else column == grp
    return result


class _MomentText(FunctionElement[str]):
    """A moment column as the canonical form spells it, ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC:
    SQLite holds that very text; Postgres spells its timestamptz so."""

    type = Text()
    inherit_cache = True
    name = "moment_text"


@compiles(_MomentText, "sqlite")
def _moment_text_sqlite(element: _MomentText, compiler: SQLCompiler, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(_MomentText, "postgresql")
def _moment_text_postgres(element: _MomentText, compiler: SQLCompiler, **kw: Any) -> str:
    moment = compiler.process(element.clauses, **kw)
    return f"to_char({moment} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"


class _RowJson(FunctionElement[str]):
    """A row's canonical JSON text from its values (each a text or NULL), built by the
    database: SQLite's ``json_array`` (its escaping is JSON's, as Python's ``json`` writes it,
    ``tests/stores/test_journal_chain.py`` compares them on any text), Postgres's ``to_json`` of
    each value joined with commas. A page of rows then comes to Python as one text a row, with
    nothing to encode: on SQLite 1.1 against 1.9 to 2.2 us a row cast and encoded in Python."""

    type = Text()
    inherit_cache = True
    name = "row_json"


@compiles(_RowJson, "sqlite")
def _row_json_sqlite(element: _RowJson, compiler: SQLCompiler, **kw: Any) -> str:
    return f"json_array({compiler.process(element.clauses, **kw)})"


class _Digits(FunctionElement[str]):
    """An integer column as its decimal text: nothing in it for JSON to escape (nor in a
    :class:`_MomentText`)."""

    type = Text()
    inherit_cache = True
    name = "digits"


@compiles(_Digits)
def _digits(element: _Digits, compiler: SQLCompiler, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS TEXT)"


@compiles(_RowJson, "postgresql")
def _row_json_postgres(element: _RowJson, compiler: SQLCompiler, **kw: Any) -> str:
    values = []
    for value in element.clauses:
        spelled = compiler.process(value, **kw)
        # Digits and moments only need their quotes: to_json of each cost a million-row
        # close's content about 0.2 us a value more (1.2-1.6 against 2.2-2.8 s for five million).
        quoted = (
            f"""'"' || {spelled} || '"'"""
            if isinstance(value, _Digits | _MomentText)
            else f"to_json({spelled})::text"
        )
        values.append(f"coalesce({quoted}, 'null')")
    return "'[' || " + " || ',' || ".join(values) + " || ']'"


def _canonical(fields: tuple[Any, ...], kinds: str) -> Any:
    """The row's canonical JSON text (:class:`_RowJson`) from its columns, every value a text
    or NULL: ``i`` an integer, cast to its decimal text; ``t`` a text as it is; ``m`` a moment,
    :class:`_MomentText`."""
    spelled: list[Any] = []
    for field, kind in zip(fields, kinds, strict=True):
        if kind == "i":
            spelled.append(_Digits(field))
        elif kind == "m":
            spelled.append(_MomentText(field))
        else:
            spelled.append(type_coerce(field, Text))
    return _RowJson(*spelled).label("row")


_ROW_T = _canonical(TRANSACTION_FIELDS, "ittttm")
_ROW_P = _canonical(POSTING_FIELDS, "iittiii")
_ROW_B = _canonical(PLACED_FIELDS, "ititiitttm")
_ROW_C = _canonical(CLOSED_FIELDS, "ititm")


@functools.cache
def row_sql(tag: str, dialect: SqlDialect) -> str:
    """Section ``tag``'s row JSON as ``dialect``'s SQL, its columns named by their tables:
    for the statement Postgres builds a commit's whole content with (:mod:`.postgres.content`),
    so that it spells each row as these queries do."""
    row = {"T": _ROW_T, "P": _ROW_P, "B": _ROW_B, "C": _ROW_C}[tag]
    return str(row.element.compile(dialect=dialect))


def _queries(grp: ColumnElement[Any] | None) -> list[tuple[str, Any]]:
    """The four sections' queries, for the group ``grp`` (a bound parameter) or the history
    (``None``). Built once: building Core statements cost more than a small commit's reads."""
    txn = transactions.c

    def of(column: Any) -> ColumnElement[bool]:
        result: ColumnElement[bool] = column.is_(None) if grp is None else column == grp
        return result

    if grp is None:
        closed = select(_ROW_C).where(
            bets.c.state != "placed", bets.c.uid.not_in(select(bet_closes.c.uid))
        )
        closed_order = bets.c.uid
    else:
        closed = (
            select(_ROW_C)
            .select_from(bet_closes.join(bets, bets.c.uid == bet_closes.c.uid))
            .where(bet_closes.c.grp == grp)
        )
        # The same order, read from bet_closes' key (grp, uid): no sort.
        closed_order = bet_closes.c.uid
    queries = [
        ("T", select(_ROW_T).where(of(txn.commit_grp)).order_by(txn.id)),
        (
            "P",
            select(_ROW_P)
            .select_from(postings.join(transactions, transactions.c.id == postings.c.txn_id))
            .where(of(txn.commit_grp))
            # By transaction, then id: the transactions' index hands them over in that order
            # (by id alone, SQLite sorted a close's postings: 0.49 against 0.38 s at 220,000).
            .order_by(txn.id, postings.c.id),
        ),
        ("B", select(_ROW_B).where(of(bets.c.placed_grp)).order_by(bets.c.uid)),
        ("C", closed.order_by(closed_order)),
    ]
    return [(tag, query.execution_options(yield_per=_PAGE)) for tag, query in queries]


_OF_GROUP = _queries(bindparam("grp"))
_OF_HISTORY = _queries(None)


@functools.cache
def plain_queries(dialect: SqlDialect) -> list[tuple[str, str]]:
    """The four sections' queries of one group as ``dialect``'s SQL text, its one parameter
    the group, each with its tag: for a driver's own cursor (SQLite's writer, where
    SQLAlchemy's execution cost more than the rows of a group commit of Place Bets)."""
    return [(tag, str(query.compile(dialect=dialect))) for tag, query in _OF_GROUP]


def driver_pages(cursor: Any) -> Iterator[list[str]]:
    """A driver cursor's rows (each one text: its canonical JSON), a page at a time."""
    while page := cursor.fetchmany(_PAGE):
        yield [row for (row,) in page]


def content_of_pages(sections: Iterable[tuple[str, Iterable[Sequence[str]]]]) -> Content:
    """The content hash of each section's rows (each row's canonical JSON text, as the queries
    above give them) in pages, the sections in order."""
    content = Content()
    for tag, pages in sections:
        content.add_section(tag, pages)
    return content


def commit_content(connection: Connection, grp: int | None) -> Content:
    """The content hash of the rows commit ``grp`` wrote (``None``: the history before the
    chain), read in canonical order."""
    queries, parameters = (_OF_HISTORY, {}) if grp is None else (_OF_GROUP, {"grp": grp})
    return content_of_pages(
        (
            tag,
            (
                [row for (row,) in page]
                for page in connection.execute(query, parameters).partitions()
            ),
        )
        for tag, query in queries
    )


def commit_text(connection: Connection, grp: int | None) -> str:
    """The canonical content of commit ``grp`` itself (what :func:`commit_content` hashes), for
    a proof that shows a bet's rows in it. Its size is the commit's: a set-based close of a
    million bets is hundreds of megabytes."""
    queries, parameters = (_OF_HISTORY, {}) if grp is None else (_OF_GROUP, {"grp": grp})
    return "".join(
        f"{tag}[{','.join(row for (row,) in connection.execute(query, parameters))}]"
        for tag, query in queries
    )


# SQLite's record: three statements of plain SQL (the cheapest way; one writer holds the lock).
_HEAD = "SELECT seq, record_hash FROM journal_head WHERE id = 1"
_MOVE = "UPDATE journal_head SET seq = ?, prev_hash = ?, record_hash = ? WHERE id = 1"
_APPEND = (
    "INSERT INTO journal_chain (seq, grp, prev_hash, content_hash, record_hash, committed_at, "
    "row_count) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def seal_plain(
    connection: Connection, dialect: Dialect, grp: int, content: Content, at: datetime
) -> None:
    """:func:`seal_in_steps` in plain SQL (SQLite, every commit)."""
    head_row = dialect.run(connection, _HEAD).fetchone()
    if head_row is None:
        seal_in_steps(connection, grp, content, at)
        return
    seq, prev = int(head_row[0]) + 1, bytes.fromhex(head_row[1])
    digest = content.digest()
    record = record_hash(seq, prev, digest, at).hex()
    dialect.run(connection, _MOVE, (seq, prev.hex(), record))
    dialect.run(
        connection,
        _APPEND,
        (seq, grp, prev.hex(), digest.hex(), record, dialect.timestamp(at), content.rows),
    )


def seal_in_steps(
    connection: Connection, grp: int | None, content: Content, at: datetime
) -> ChainRecord:
    """Append the record of commit ``grp`` in three statements, the hash computed here (SQLite,
    one writer; the migration, for the history). Postgres does it in one statement, queued
    with the COMMIT (ledger.stores.postgres)."""
    head_row = connection.execute(
        select(journal_head.c.seq, journal_head.c.record_hash).where(journal_head.c.id == 1)
    ).first()
    if head_row is None:
        # A schema made without the migration's row (from the metadata): the first writer's.
        seq, prev = 1, GENESIS
        connection.execute(
            insert(journal_head).values(
                id=1, seq=0, prev_hash=GENESIS.hex(), record_hash=GENESIS.hex()
            )
        )
    else:
        seq, prev = int(head_row[0]) + 1, bytes.fromhex(head_row[1])
    digest = content.digest()
    record = record_hash(seq, prev, digest, at)
    connection.execute(
        update(journal_head)
        .where(journal_head.c.id == 1)
        .values(seq=seq, prev_hash=prev.hex(), record_hash=record.hex())
    )
    connection.execute(
        insert(journal_chain).values(
            seq=seq,
            grp=grp,
            prev_hash=prev.hex(),
            content_hash=digest.hex(),
            record_hash=record.hex(),
            committed_at=at,
            row_count=content.rows,
        )
    )
    return ChainRecord(seq, grp, prev, digest, record, at, content.rows)


def one_statement_parameters(grp: int, at: datetime) -> tuple[Any, ...]:
    """The parameters of :data:`ONE_STATEMENT` for commit ``grp``, committed ``at``."""
    return (RECORD_PREFIX, micros(at), grp, at)


def _record(row: Any) -> ChainRecord:
    at = row.committed_at
    return ChainRecord(
        int(row.seq),
        None if row.grp is None else int(row.grp),
        bytes.fromhex(row.prev_hash),
        bytes.fromhex(row.content_hash),
        bytes.fromhex(row.record_hash),
        at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC),
        int(row.row_count),
    )


def records(connection: Connection, after: int = 0, page: int = 1000) -> Iterator[ChainRecord]:
    """The stored records with ``seq`` above ``after``, in order, read a page at a time (bounded
    memory; no cursor held open across the caller's own queries)."""
    c = journal_chain.c
    while True:
        rows = connection.execute(
            select(journal_chain).where(c.seq > after).order_by(c.seq).limit(page)
        ).all()
        for row in rows:
            yield _record(row)
        if len(rows) < page:
            return
        after = int(rows[-1].seq)


def record_of(connection: Connection, grp: int | None) -> ChainRecord | None:
    """The record of commit ``grp``."""
    row = connection.execute(select(journal_chain).where(_of(journal_chain.c.grp, grp))).first()
    return None if row is None else _record(row)


def head(connection: Connection) -> tuple[int, bytes]:
    """The number and hash of the last record (0 and zeros before the first)."""
    row = connection.execute(
        select(journal_head.c.seq, journal_head.c.record_hash).where(journal_head.c.id == 1)
    ).first()
    if row is None:
        return 0, GENESIS
    return int(row[0]), bytes.fromhex(row[1])


def size(connection: Connection) -> int:
    """How many records the chain holds."""
    return int(connection.execute(select(func.count()).select_from(journal_chain)).scalar() or 0)
