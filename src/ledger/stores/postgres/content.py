"""A commit's content hash computed by Postgres: the canonical bytes of its rows
(ledger.integrity.canonical, docs/integrity.md) built and hashed in SQL, so that a set-based
close's million rows never pass through Python, and a Place Bet's batch costs one statement.

Invariant: the bytes are those of :func:`ledger.stores.chain.commit_content`, which ``ledger
verify`` runs in Python: every verify of a Postgres journal checks this SQL against it.
"""

from __future__ import annotations

from sqlalchemy import Connection

from ...integrity.canonical import Digest

__all__ = ["commit_digest"]

NULL = "'\\x00'::bytea"


def _integer(expression: str) -> str:
    text = f"({expression})::text"
    return (
        f"CASE WHEN {expression} IS NULL THEN {NULL} ELSE "
        f"'\\x01'::bytea || int4send(length({text})) || convert_to({text}, 'UTF8') END"
    )


def _text(expression: str) -> str:
    raw = f"convert_to({expression}, 'UTF8')"
    return (
        f"CASE WHEN {expression} IS NULL THEN {NULL} ELSE "
        f"'\\x02'::bytea || int4send(octet_length({raw})) || {raw} END"
    )


def _moment(expression: str) -> str:
    # Postgres 14 and later: extract(epoch ...) is an exact numeric.
    return _integer(f"round(extract(epoch FROM {expression}) * 1000000)::bigint")


def _row(tag: str, values: list[str]) -> str:
    return f"'\\x{ord(tag):02x}'::bytea || " + " || ".join(values)


_SECTIONS = {
    "t": (
        _row(
            "T",
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
            "P",
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
        "p.id",
        "postings p JOIN transactions t ON t.id = p.txn_id WHERE t.commit_grp = %(grp)s",
    ),
    "b": (
        _row(
            "B",
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
            "C",
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
    "{name} AS (SELECT string_agg({row}, ''::bytea ORDER BY {order}) AS bytes, "
    "count(*) AS n FROM {source})"
)
_ALL = (
    " SELECT sha256(coalesce(t.bytes, '') || coalesce(p.bytes, '') || coalesce(b.bytes, '') "
    "|| coalesce(c.bytes, '')), t.n + p.n + b.n + c.n FROM t, p, b, c"
)
# Built from the constants above: no input in it.
DIGEST = (
    "WITH "
    + ", ".join(
        _SECTION.format(name=name, row=row, order=order, source=source)
        for name, (row, order, source) in _SECTIONS.items()
    )
    + _ALL
)


def commit_digest(connection: Connection, grp: int) -> Digest:
    """The content hash of commit ``grp``'s rows, and how many there are, from Postgres."""
    row = connection.exec_driver_sql(DIGEST, {"grp": grp}).one()
    return Digest(bytes(row[0]), int(row[1]))
