"""Postgres: the balancing check once per INSERT statement, not once per transaction row.

Revision ID: 0010
Revises: 0008

0001 checked, at commit, for every transaction row, that its postings sum to zero per currency
(a deferred constraint trigger, FOR EACH ROW): a group commit of Place Bets queued one trigger
event per transaction and ran one query each. The postings of a transaction are always written
before its row (ledger.stores.sql, ledger.stores.closing), ``postings_sealed`` refuses postings
for a transaction whose row exists, and the postings' deferred foreign key refuses, at commit, a
posting whose transaction row never came: so the rows can be checked when they arrive, as on
SQLite, all the rows of one INSERT in one query over its transition table. Every transaction is
still balanced at commit, and the database still refuses one that is not (same error, same
constraint name). SQLite already checks each row as it arrives: nothing changes there.

Both statement-level checks join their transition table to a journal table by key. A plpgsql
function keeps the plan it made at its first call in a session, when a young ledger's tables
are small: a hash join over, or a nested loop around, a sequential scan of the whole journal,
run again on every statement as the journal grows (measured under a Place Bet load on a fresh
database: the ``postings_sealed`` check alone took 7.7 ms a statement, most of the Postgres
server's CPU). Sequential scans, hash and merge joins are therefore off inside both functions:
each transition row looks its key up in the index, whatever the sizes.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0008"
branch_labels = None
depends_on = None

UPGRADE = [
    "DROP TRIGGER transactions_balanced ON transactions",
    "DROP FUNCTION ledger_check_balanced()",
    """CREATE FUNCTION ledger_transactions_balanced() RETURNS trigger LANGUAGE plpgsql
       SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $$
       DECLARE
         unbalanced bigint;
       BEGIN
         SELECT n.id INTO unbalanced FROM new_rows n JOIN postings p ON p.txn_id = n.id
         GROUP BY n.id, p.currency HAVING SUM(p.amount) <> 0 LIMIT 1;
         IF FOUND THEN
           RAISE EXCEPTION 'ledger: unbalanced transaction %', unbalanced
             USING ERRCODE = 'check_violation', CONSTRAINT = 'transactions_balanced';
         END IF;
         RETURN NULL;
       END $$""",
    """CREATE TRIGGER transactions_balanced AFTER INSERT ON transactions
       REFERENCING NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_transactions_balanced()""",
    *(
        f"ALTER FUNCTION ledger_postings_sealed() SET {setting} = off"
        for setting in ("enable_seqscan", "enable_hashjoin", "enable_mergejoin")
    ),
]

# 0001's guards, as they were.
DOWNGRADE = [
    "ALTER FUNCTION ledger_postings_sealed() RESET ALL",
    "DROP TRIGGER transactions_balanced ON transactions",
    "DROP FUNCTION ledger_transactions_balanced()",
    """CREATE FUNCTION ledger_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF EXISTS (SELECT 1 FROM postings WHERE txn_id = NEW.id
                    GROUP BY currency HAVING SUM(amount) <> 0) THEN
           RAISE EXCEPTION 'ledger: unbalanced transaction %', NEW.id
             USING ERRCODE = 'check_violation', CONSTRAINT = 'transactions_balanced';
         END IF;
         RETURN NULL;
       END $$""",
    """CREATE CONSTRAINT TRIGGER transactions_balanced AFTER INSERT ON transactions
       DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_balanced()""",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in DOWNGRADE:
            op.execute(statement)
