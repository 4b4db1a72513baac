"""Postgres: the journal's statement-level checks walk the inserted rows, never the journal.

Revision ID: 0013
Revises: 0012

0010 turned sequential scans, hash and merge joins off inside ``ledger_postings_sealed`` and
``ledger_transactions_balanced``, so that each inserted row would look its key up in an index.
A nested loop can still be built the other way round: the whole journal, read through its
index (no sequential scan is left to it), on the outside, and the statement's transition table
scanned again for every journal row on the inside. plpgsql keeps the plan made at the first
call in a session, on a young ledger where that order looked cheap, and the check then grows
with the journal. `perf` on the Postgres server under benchmark (a) with two workers: most of
its CPU in ``ExecNestLoop``, ``ExecNamedTuplestoreScan`` and ``tuplestore_gettuple``, 436 to
628 us of database CPU per Place Bet against 104 with one worker.

Each check now reads its transition table on the outside by construction: a ``LATERAL``
subquery with a ``LIMIT`` is never flattened into a join, so it runs once per inserted row,
parameterised by that row's key (an index lookup). What is checked, and the error raised, are
unchanged. ``tests/stores/test_postgres_journal_checks.py`` reads the plans through
auto_explain: on a fresh ledger, a first group of 80 postings made 0010's balanced check walk
``postings_txn`` outside. Benchmark (a) on Postgres with two workers, after: 173 us of database
CPU per Place Bet (436 to 628 before), 3,627 req/s (1,431 to 2,203), p99 1.6 x the echo's (4.1
to 4.2).
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

OFF = "SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off"

SEALED = """CREATE OR REPLACE FUNCTION ledger_postings_sealed() RETURNS trigger LANGUAGE plpgsql
   {settings} AS $$
   BEGIN
     IF EXISTS ({query}) THEN
       RAISE EXCEPTION 'ledger: transaction is sealed' USING ERRCODE = 'restrict_violation';
     END IF;
     RETURN NULL;
   END $$"""

BALANCED = """CREATE OR REPLACE FUNCTION ledger_transactions_balanced() RETURNS trigger
   LANGUAGE plpgsql {settings} AS $$
   DECLARE
     unbalanced bigint;
   BEGIN
     {query}
     IF FOUND THEN
       RAISE EXCEPTION 'ledger: unbalanced transaction %', unbalanced
         USING ERRCODE = 'check_violation', CONSTRAINT = 'transactions_balanced';
     END IF;
     RETURN NULL;
   END $$"""

SEALED_BY_ROW = """SELECT 1 FROM new_rows n
       CROSS JOIN LATERAL (SELECT 1 FROM transactions t WHERE t.id = n.txn_id LIMIT 1) sealed"""
BALANCED_BY_ROW = """SELECT n.id INTO unbalanced FROM new_rows n
       CROSS JOIN LATERAL (SELECT p.currency FROM postings p WHERE p.txn_id = n.id
                           GROUP BY p.currency HAVING SUM(p.amount) <> 0 LIMIT 1) leg
       LIMIT 1;"""

# 0010's, as they were.
SEALED_BY_JOIN = "SELECT 1 FROM new_rows n JOIN transactions t ON t.id = n.txn_id"
BALANCED_BY_JOIN = """SELECT n.id INTO unbalanced FROM new_rows n JOIN postings p ON p.txn_id = n.id
       GROUP BY n.id, p.currency HAVING SUM(p.amount) <> 0 LIMIT 1;"""


def _replace(sealed: str, balanced: str) -> None:
    # CREATE OR REPLACE keeps the triggers; a function's SET clauses are replaced with it.
    op.execute(SEALED.format(settings=OFF, query=sealed))
    op.execute(BALANCED.format(settings=OFF, query=balanced))


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _replace(SEALED_BY_ROW, BALANCED_BY_ROW)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _replace(SEALED_BY_JOIN, BALANCED_BY_JOIN)
