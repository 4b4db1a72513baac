"""A commit's content hash computed by Postgres: the canonical bytes of its rows
(ledger.integrity.canonical, docs/integrity.md) built and hashed in SQL, so that a set-based
close's million rows never pass through Python, and a Place Bet's batch costs one statement
queued with its COMMIT (no round trip of its own).

Invariant: the bytes are those of :func:`ledger.stores.chain.commit_content`, which ``ledger
verify`` runs: each row is spelled by the same expression (:func:`ledger.stores.chain.row_sql`),
the sections here are the same rows in the same order (every verify of a Postgres journal
checks that), and ``to_json`` writes a text as Python's ``json`` does
(``tests/stores/test_journal_chain.py``, on any text).
"""

from __future__ import annotations

import functools

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect

from .. import chain
from .pipeline import defer

__all__ = ["stage_content", "stage_statement"]

# Each section: its name, the order of its rows, where they come from. The rows' JSON is the
# chain's own spelling (ledger.stores.chain.row_sql).
_SECTIONS = (
    ("T", "transactions.id", "transactions WHERE transactions.commit_grp = %(grp)s"),
    (
        "P",
        "transactions.id, postings.id",
        "postings JOIN transactions ON transactions.id = postings.txn_id "
        "WHERE transactions.commit_grp = %(grp)s",
    ),
    ("B", "bets.uid", "bets WHERE bets.placed_grp = %(grp)s"),
    (
        "C",
        "bet_closes.uid",
        "bet_closes JOIN bets ON bets.uid = bet_closes.uid WHERE bet_closes.grp = %(grp)s",
    ),
)

_SECTION = (
    "s{tag} AS (SELECT '{tag}[' || coalesce(string_agg({row}, ',' ORDER BY {order}), '') "
    "|| ']' AS text, count(*) AS n FROM {source})"
)
# The content's hash and row count, kept in a transaction-local setting for the record's
# statement (ledger.stores.chain.ONE_STATEMENT) that follows it in the same round trip.
_ALL = (
    " SELECT set_config('ledger.chain_content', encode(sha256(convert_to(sT.text || sP.text "
    "|| sB.text || sC.text, 'UTF8')), 'hex') || ':' || (sT.n + sP.n + sB.n + sC.n), true) "
    "FROM sT, sP, sB, sC"
)


@functools.cache
def stage_statement(dialect: Dialect) -> str:
    """The statement of :func:`stage_content`, built once from the constants above and the
    chain's row spelling: no input in it."""
    return (
        "WITH "
        + ", ".join(
            _SECTION.format(tag=tag, row=chain.row_sql(tag, dialect), order=order, source=source)
            for tag, order, source in _SECTIONS
        )
        + _ALL
    )


def stage_content(connection: Connection, grp: int) -> None:
    """Queue the statement that computes commit ``grp``'s content hash in the database, to
    run after the writes queued before it and before the locks the commit's last statements
    take (the event counter's, the chain head's)."""
    defer(connection, stage_statement(connection.dialect), {"grp": grp})
