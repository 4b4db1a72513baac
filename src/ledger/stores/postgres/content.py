"""A commit's content hash computed by Postgres: the canonical bytes of its rows
(ledger.integrity.canonical, docs/integrity.md) built and hashed in SQL, so that a set-based
close's million rows never pass through Python, and a Place Bet's batch costs one statement
queued with its COMMIT (no round trip of its own).

Invariant: the bytes are those of :func:`ledger.stores.chain.commit_content`, which ``ledger
verify`` runs (its own queries, their rows joined in Python): every verify of a Postgres journal
checks this SQL against them, and ``to_json`` writes a text as Python's ``json`` does
(``tests/stores/test_journal_chain.py``, on any text).
"""

from __future__ import annotations

from sqlalchemy import Connection

from .pipeline import defer

__all__ = ["STAGE", "stage_content"]


def _integer(expression: str) -> str:
    # A JSON string of the decimal digits (NULL stays NULL through ||, then 'null').
    return f"""coalesce('"' || ({expression})::text || '"', 'null')"""


def _text(expression: str) -> str:
    # to_json escapes exactly what JSON requires, as the Python encoder does.
    return f"coalesce(to_json({expression})::text, 'null')"


def _moment(expression: str) -> str:
    return _integer(f"to_char({expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')")


def _row(values: list[str]) -> str:
    return "'[' || " + " || ',' || ".join(values) + " || ']'"


_SECTIONS = {
    "t": (
        _row(
            [
                _integer("t.id"),
                _text("t.idempotency_key"),
                _text("t.kind"),
                _text("t.user_uid"),
                _text("t.reference"),
                _moment("t.created_at"),
            ],
        ),
        "t.id",
        "transactions t WHERE t.commit_grp = %(grp)s",
    ),
    "p": (
        _row(
            [
                _integer("p.id"),
                _integer("p.txn_id"),
                _text("p.account"),
                _text("p.currency"),
                _integer("p.amount"),
                _integer("p.bet_uid"),
                _integer("p.balance_after"),
            ],
        ),
        "t.id, p.id",
        "postings p JOIN transactions t ON t.id = p.txn_id WHERE t.commit_grp = %(grp)s",
    ),
    "b": (
        _row(
            [
                _integer("b.uid"),
                _text("b.user_uid"),
                _integer("b.pool_uid"),
                _text("b.currency"),
                _integer("b.amount"),
                _integer("b.rake"),
                _text("b.funding"),
                _text("b.ticket"),
                _text("b.request_uuid"),
                _moment("b.placed_at"),
            ],
        ),
        "b.uid",
        "bets b WHERE b.placed_grp = %(grp)s",
    ),
    "c": (
        _row(
            [
                _integer("b.uid"),
                _text("b.state"),
                _integer("b.payout"),
                _text("b.payout_currency"),
                _moment("b.closed_at"),
            ],
        ),
        "b.uid",
        "bet_closes c JOIN bets b ON b.uid = c.uid WHERE c.grp = %(grp)s",
    ),
}

_SECTION = (
    "{name} AS (SELECT '{tag}[' || coalesce(string_agg({row}, ',' ORDER BY {order}), '') "
    "|| ']' AS text, count(*) AS n FROM {source})"
)
# The content's hash and row count, kept in a transaction-local setting for the record's
# statement (ledger.stores.chain.ONE_STATEMENT) that follows it in the same round trip.
_ALL = (
    " SELECT set_config('ledger.chain_content', encode(sha256(convert_to(t.text || p.text "
    "|| b.text || c.text, 'UTF8')), 'hex') || ':' || (t.n + p.n + b.n + c.n), true) "
    "FROM t, p, b, c"
)
# Built from the constants above: no input in it.
STAGE = (
    "WITH "
    + ", ".join(
        _SECTION.format(name=name, tag=name.upper(), row=row, order=order, source=source)
        for name, (row, order, source) in _SECTIONS.items()
    )
    + _ALL
)


def stage_content(connection: Connection, grp: int) -> None:
    """Queue the statement that computes commit ``grp``'s content hash in the database, to
    run after the writes queued before it and before the locks the commit's last statements
    take (the event counter's, the chain head's)."""
    defer(connection, STAGE, {"grp": grp})
