"""Postgres: an INSERT into the postings looks each of its transactions up once, not per row.

Revision ID: 0018
Revises: 0017

``ledger_postings_sealed`` refuses postings for a transaction whose row exists (a sealed one).
Since 0013 it looked the transaction up once per inserted posting (a ``LATERAL`` index lookup
per row), and since 0017 it also gathered the statement's distinct transaction ids for the
check at commit. The ids are now gathered first, and the transactions looked up once for all
of them (one index scan over the array, as the check at commit does): a settle of 1,000,000
participants inserts 1,100,000 postings for twenty transactions, and made 1,100,000 lookups
(``EXPLAIN ANALYZE`` at 100,000: the trigger 39 to 66 ms, of which the lookups most). What is
refused, and the error (SQLSTATE 23001, restrict_violation), are unchanged.
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

OFF = "SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off"

# The statement's distinct transaction ids (hashed, not sorted), in one array; none for no rows.
# With sequential scans off the lookup is one scan of the transactions' key index for them all,
# whatever plan the function keeps from its first call in a session.
PER_TRANSACTION = f"""CREATE OR REPLACE FUNCTION ledger_postings_sealed() RETURNS trigger
   LANGUAGE plpgsql {OFF} AS $$
   DECLARE
     ids bigint[];
   BEGIN
     SELECT array_agg(txn_id) INTO ids FROM (SELECT DISTINCT txn_id FROM new_rows) AS d;
     IF ids IS NULL THEN
       RETURN NULL;
     END IF;
     IF EXISTS (SELECT 1 FROM transactions t WHERE t.id = ANY (ids)) THEN
       RAISE EXCEPTION 'ledger: transaction is sealed' USING ERRCODE = 'restrict_violation';
     END IF;
     INSERT INTO journal_unsealed (txn_ids) VALUES (ids);
     RETURN NULL;
   END $$"""  # noqa: S608 - fixed SQL, no input

# 0017's, as it was.
PER_ROW = f"""CREATE OR REPLACE FUNCTION ledger_postings_sealed() RETURNS trigger
   LANGUAGE plpgsql {OFF} AS $$
   BEGIN
     IF EXISTS (SELECT 1 FROM new_rows n
       CROSS JOIN LATERAL (SELECT 1 FROM transactions t WHERE t.id = n.txn_id LIMIT 1) sealed) THEN
       RAISE EXCEPTION 'ledger: transaction is sealed' USING ERRCODE = 'restrict_violation';
     END IF;
     INSERT INTO journal_unsealed (txn_ids)
       SELECT ids FROM (SELECT array_agg(txn_id) AS ids
                        FROM (SELECT DISTINCT txn_id FROM new_rows) AS d) AS a
       WHERE ids IS NOT NULL;
     RETURN NULL;
   END $$"""  # noqa: S608 - fixed SQL, no input


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PER_TRANSACTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PER_ROW)
