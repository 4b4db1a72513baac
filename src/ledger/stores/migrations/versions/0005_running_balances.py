"""Running balances: each posting carries its account's balance after it.

Revision ID: 0005
Revises: 0002

``postings.balance_after`` is written by the store's ``post()`` in the same transaction as the
posting, for user and house accounts alike. It is what point-in-time balances and statements
read, and ``ledger check`` proves it: each equals the previous one plus the posting, in posting
order, and the last equals the account's balance. Same representation as every money column
(ledger.stores.schema): NUMERIC with the 38-digit integer CHECK on Postgres; on SQLite an
INTEGER, or canonical text beyond 64 bits, in a column of BLOB affinity.

The column is nullable only because SQLite cannot add a NOT NULL column without a default;
``post()`` never writes a NULL and ``ledger check`` reports any.

Two indexes serve the operator's other questions: ``transactions_created`` (period summaries
of the house accounts) and ``bets_open`` (open and stale holds, oldest first).

Existing postings are backfilled here. The journal is append-only, guarded by triggers that
refuse any UPDATE of postings: this migration lifts that guard for its own backfill only, in its
own transaction (Postgres: DISABLE/ENABLE TRIGGER; SQLite: DROP and CREATE the same trigger),
and puts it back before it commits.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

INT64_MAX = 2**63 - 1

# The same CHECK as 0002's money columns (an exact integer of at most 38 digits), NULL allowed.
SQLITE_EXACT = """(balance_after IS NULL OR typeof(balance_after) = 'integer' OR (
    typeof(balance_after) = 'text'
    AND balance_after NOT GLOB '--*'
    AND ltrim(balance_after, '-') GLOB '[1-9]*'
    AND ltrim(balance_after, '-') NOT GLOB '*[^0-9]*'
    AND length(ltrim(balance_after, '-')) BETWEEN 19 AND 38
    AND (length(ltrim(balance_after, '-')) > 19 OR ltrim(balance_after, '-') >
         CASE WHEN balance_after GLOB '-*' THEN '9223372036854775808'
         ELSE '9223372036854775807' END)))"""

# 0002's trigger, recreated as it was after the backfill.
SQLITE_GUARD = """CREATE TRIGGER postings_append_only_update BEFORE UPDATE ON postings
    BEGIN SELECT RAISE(ABORT, 'ledger: the journal is append-only'); END"""


def _stored(value: int) -> int | str:
    return value if -(2**63) <= value <= INT64_MAX else str(value)


# For the operator's questions: a period of time (house summaries), open holds oldest first.
INDEXES = [
    "CREATE INDEX transactions_created ON transactions (created_at)",
    "CREATE INDEX bets_open ON bets (state, placed_at, uid)",
]


def upgrade() -> None:
    bind = op.get_bind()
    for statement in INDEXES:
        op.execute(statement)
    if bind.dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE postings ADD COLUMN balance_after NUMERIC, "
            "ADD CONSTRAINT postings_balance_after_exact CHECK "
            f"(balance_after = trunc(balance_after) AND abs(balance_after) <= {10**38 - 1})"
        )
        # The append-only guard is lifted for this backfill only (see the module's docstring).
        op.execute("ALTER TABLE postings DISABLE TRIGGER postings_append_only")
        # NUMERIC adds exactly at any size: one statement, in posting order per account.
        op.execute(
            "UPDATE postings p SET balance_after = r.running FROM ("
            "SELECT id, sum(amount) OVER (PARTITION BY account, currency ORDER BY id) AS running "
            "FROM postings) r WHERE p.id = r.id"
        )
        # The UPDATE queued the deferred foreign-key checks, and Postgres alters no table with
        # trigger events pending: run them now (they pass: no txn_id changed).
        op.execute("SET CONSTRAINTS ALL IMMEDIATE")
        op.execute("ALTER TABLE postings ENABLE TRIGGER postings_append_only")
        return
    op.execute(
        "ALTER TABLE postings ADD COLUMN balance_after BLOB "
        f"CONSTRAINT postings_balance_after_exact CHECK {SQLITE_EXACT}"
    )
    # The append-only guard is lifted for this backfill only (see the module's docstring).
    op.execute("DROP TRIGGER postings_append_only_update")
    # SQLite's own SUM overflows at 64 bits: the running values are added here, in Python,
    # reading in the order of the (account, currency, id) index.
    rows = bind.exec_driver_sql(
        "SELECT id, account, currency, amount FROM postings ORDER BY account, currency, id"
    )
    account: tuple[str, str] | None = None
    running = 0
    batch: list[tuple[int | str, int]] = []
    for posting_id, name, currency, amount in rows:
        if (name, currency) != account:
            account, running = (name, currency), 0
        running += int(amount)
        batch.append((_stored(running), posting_id))
    rows.close()
    for start in range(0, len(batch), 50_000):
        bind.exec_driver_sql(
            "UPDATE postings SET balance_after = ? WHERE id = ?", batch[start : start + 50_000]
        )
    op.execute(SQLITE_GUARD)
