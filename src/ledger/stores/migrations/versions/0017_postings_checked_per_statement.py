"""Postgres: a posting's transaction is checked once per INSERT at commit, not by a foreign key.

Revision ID: 0017
Revises: 0016

The postings' deferred foreign key on ``txn_id`` checked, at commit, every posting by itself: a
queued trigger event per row on insert, then one ``SELECT ... FOR KEY SHARE`` of its
transaction each. A settle of 1,000,000 participants writes 1,100,000 postings, for twenty
transactions: 3.4 s of the server's CPU, the largest single cost of the settle.

What the key guaranteed is kept, set-based. The journal is append-only (``postings`` and
``transactions`` refuse UPDATE and DELETE), so a posting can only lose its transaction by never
getting one: every INSERT into ``postings`` already runs ``ledger_postings_sealed`` once, over
its new rows; it now also notes the distinct transaction ids of those rows, in one row of
``journal_unsealed``. That row's deferred constraint trigger runs at commit (or at ``SET
CONSTRAINTS ALL IMMEDIATE``), once per INSERT: it refuses the commit if any of those ids has no
transaction row (SQLSTATE 23503, foreign_key_violation, as the key did), and deletes the row.
``ledger check`` still counts postings without a transaction. SQLite keeps its foreign key: a
lookup in its own B-tree per row, cheap there.

``journal_unsealed`` only ever holds rows of transactions in flight: unlogged (no WAL for it; a
crash or a standby's promotion leaves it empty, which is its committed state anyway).

Measured on a settle of 1,000,000 participants on Postgres (``benchmarks/settle_split.py``, the
same book copied from one template): 29.3 -> 25.3 s.
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

OFF = "SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off"

SEALED = """CREATE OR REPLACE FUNCTION ledger_postings_sealed() RETURNS trigger LANGUAGE plpgsql
   {settings} AS $$
   BEGIN
     IF EXISTS (SELECT 1 FROM new_rows n
       CROSS JOIN LATERAL (SELECT 1 FROM transactions t WHERE t.id = n.txn_id LIMIT 1) sealed) THEN
       RAISE EXCEPTION 'ledger: transaction is sealed' USING ERRCODE = 'restrict_violation';
     END IF;{note}
     RETURN NULL;
   END $$"""

# The statement's distinct transaction ids (hashed, not sorted), in one row; none for no rows.
NOTE = """
     INSERT INTO journal_unsealed (txn_ids)
       SELECT ids FROM (SELECT array_agg(txn_id) AS ids
                        FROM (SELECT DISTINCT txn_id FROM new_rows) AS d) AS a
       WHERE ids IS NOT NULL;"""

# One index scan for all the ids (they are distinct): whatever plan the function keeps, it
# cannot scan the whole journal (an anti-join over the unnested array, planned by hash,
# scanned every transaction: 370 us a commit).
AT_COMMIT = f"""CREATE FUNCTION ledger_postings_have_transactions() RETURNS trigger
   LANGUAGE plpgsql {OFF} AS $$
   BEGIN
     IF (SELECT count(*) FROM transactions WHERE id = ANY (NEW.txn_ids))
        <> cardinality(NEW.txn_ids) THEN
       RAISE EXCEPTION 'ledger: postings without their transaction, among %', NEW.txn_ids
         USING ERRCODE = 'foreign_key_violation';
     END IF;
     DELETE FROM journal_unsealed WHERE id = NEW.id;
     RETURN NULL;
   END $$"""  # noqa: S608 - fixed SQL, no input

UPGRADE = [
    """CREATE UNLOGGED TABLE journal_unsealed (
         id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
         txn_ids bigint[] NOT NULL)""",
    AT_COMMIT,
    """CREATE CONSTRAINT TRIGGER journal_unsealed_at_commit AFTER INSERT ON journal_unsealed
       DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
       EXECUTE FUNCTION ledger_postings_have_transactions()""",
    SEALED.format(settings=OFF, note=NOTE),
    "ALTER TABLE postings DROP CONSTRAINT postings_txn_id_fkey",
]

DOWNGRADE = [
    """ALTER TABLE postings ADD CONSTRAINT postings_txn_id_fkey FOREIGN KEY (txn_id)
       REFERENCES transactions (id) DEFERRABLE INITIALLY DEFERRED""",
    SEALED.format(settings=OFF, note=""),
    "DROP TABLE journal_unsealed",
    "DROP FUNCTION ledger_postings_have_transactions()",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in DOWNGRADE:
            op.execute(statement)
