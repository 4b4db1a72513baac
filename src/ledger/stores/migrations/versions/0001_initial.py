"""The ledger schema: accounts, transactions, postings, bets, and the database's own guards.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

BET_FIELDS = ("user_uid", "pool_uid", "currency", "amount", "rake", "funding")

# SQLite has no deferred triggers. Instead, postings are written first and the transaction row
# seals them: its insert trigger refuses postings that do not sum to zero per currency, postings
# cannot be added to a sealed transaction, and the deferred foreign key refuses, at commit, any
# posting left without its transaction row. Together: at commit every transaction is balanced.
SQLITE_GUARDS = [
    """CREATE TRIGGER transactions_balanced AFTER INSERT ON transactions
       WHEN EXISTS (SELECT 1 FROM postings WHERE txn_id = NEW.id
                    GROUP BY currency HAVING SUM(amount) <> 0)
       BEGIN SELECT RAISE(ABORT, 'ledger: unbalanced transaction'); END""",
    """CREATE TRIGGER postings_sealed BEFORE INSERT ON postings
       WHEN EXISTS (SELECT 1 FROM transactions WHERE id = NEW.txn_id)
       BEGIN SELECT RAISE(ABORT, 'ledger: transaction is sealed'); END""",
    *(
        f"""CREATE TRIGGER {table}_append_only_{verb} BEFORE {verb.upper()} ON {table}
            BEGIN SELECT RAISE(ABORT, 'ledger: the journal is append-only'); END"""
        for table in ("postings", "transactions")
        for verb in ("update", "delete")
    ),
    # A bet leaves 'placed' once, for 'refunded' or 'settled', and nothing else of it changes:
    # the database itself keeps a bet from being refunded or settled twice, or both.
    f"""CREATE TRIGGER bets_close_once BEFORE UPDATE ON bets
        WHEN OLD.state <> 'placed' OR NEW.state = 'placed' OR NEW.uid <> OLD.uid
             {" ".join(f"OR NEW.{name} <> OLD.{name}" for name in BET_FIELDS)}
        BEGIN SELECT RAISE(ABORT, 'ledger: a bet is closed once, never changed otherwise'); END""",
    """CREATE TRIGGER bets_no_delete BEFORE DELETE ON bets
       BEGIN SELECT RAISE(ABORT, 'ledger: bets are never deleted'); END""",
]

# Postgres checks set-based, once per statement or transaction rather than once per row: bulk
# writes (a settle of a million participants) insert tens of thousands of rows per statement.
POSTGRES_GUARDS = [
    """CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'ledger: the journal is append-only' USING ERRCODE = 'restrict_violation';
       END $$""",
    *(
        f"""CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION ledger_append_only()"""
        for table in ("postings", "transactions")
    ),
    """CREATE TRIGGER bets_no_delete BEFORE DELETE ON bets
       FOR EACH ROW EXECUTE FUNCTION ledger_append_only()""",
    *(
        f"""CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()"""
        for table in ("postings", "transactions", "bets")
    ),
    """CREATE FUNCTION ledger_postings_sealed() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF EXISTS (SELECT 1 FROM new_rows n JOIN transactions t ON t.id = n.txn_id) THEN
           RAISE EXCEPTION 'ledger: transaction is sealed' USING ERRCODE = 'restrict_violation';
         END IF;
         RETURN NULL;
       END $$""",
    """CREATE TRIGGER postings_sealed AFTER INSERT ON postings
       REFERENCING NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_postings_sealed()""",
    """CREATE FUNCTION ledger_check_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF EXISTS (SELECT 1 FROM postings WHERE txn_id = NEW.id
                    GROUP BY currency HAVING SUM(amount) <> 0) THEN
           RAISE EXCEPTION 'ledger: unbalanced transaction %', NEW.id
             USING ERRCODE = 'check_violation', CONSTRAINT = 'transactions_balanced';
         END IF;
         RETURN NULL;
       END $$""",
    # Checked at commit, once per transaction, when every posting of it is in.
    """CREATE CONSTRAINT TRIGGER transactions_balanced AFTER INSERT ON transactions
       DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_check_balanced()""",
    # Transition tables have no statistics, so the planner would join them with a nested loop:
    # quadratic, 40 s for a 20,000-bet chunk. A hash join keeps a million-bet settle linear.
    f"""CREATE FUNCTION ledger_bets_close_once() RETURNS trigger LANGUAGE plpgsql
       SET enable_nestloop = off AS $$
       BEGIN
         IF (SELECT count(*) FROM old_rows) <> (SELECT count(*) FROM new_rows)
            OR EXISTS (
              SELECT 1 FROM old_rows o LEFT JOIN new_rows n ON n.uid = o.uid
              WHERE n.uid IS NULL OR o.state <> 'placed' OR n.state = 'placed'
                 OR ({", ".join(f"n.{name}" for name in BET_FIELDS)})
                    IS DISTINCT FROM ({", ".join(f"o.{name}" for name in BET_FIELDS)})) THEN
           RAISE EXCEPTION 'ledger: a bet is closed once and never changed otherwise'
             USING ERRCODE = 'restrict_violation';
         END IF;
         RETURN NULL;
       END $$""",  # noqa: S608 - column names from BET_FIELDS above, no input
    """CREATE TRIGGER bets_close_once AFTER UPDATE ON bets
       REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_bets_close_once()""",
]


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("name", sa.String(300), primary_key=True),
        sa.Column("currency", sa.String(16), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("balance", sa.BigInteger, nullable=False, server_default="0"),
        sa.CheckConstraint("kind IN ('available', 'held', 'house')", name="accounts_kind"),
        sa.CheckConstraint("kind = 'house' OR balance >= 0", name="accounts_no_overdraft"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.schema.CreateSequence(sa.Sequence("transaction_ids")))
    op.create_table(
        "transactions",
        sa.Column("id", BigId, primary_key=True, autoincrement=False),
        sa.Column("idempotency_key", sa.String(400), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("user_uid", sa.String(255), nullable=True),
        sa.Column("reference", sa.String(300), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "postings",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "txn_id",
            sa.BigInteger,
            sa.ForeignKey("transactions.id", deferrable=True, initially="DEFERRED"),
            nullable=False,
        ),
        sa.Column("account", sa.String(300), nullable=False),
        sa.Column("currency", sa.String(16), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("bet_uid", sa.BigInteger, nullable=True),
    )
    op.create_index("postings_txn", "postings", ["txn_id"])
    op.create_index("postings_account", "postings", ["account", "currency", "id"])
    op.create_table(
        "bets",
        sa.Column("uid", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("user_uid", sa.String(255), nullable=False),
        sa.Column("pool_uid", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.String(16), nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("rake", sa.BigInteger, nullable=False),
        sa.Column("funding", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("payout", sa.BigInteger, nullable=True),
        sa.Column("payout_currency", sa.String(16), nullable=True),
        sa.Column("ticket", sa.Text, nullable=True),
        sa.Column("request_uuid", sa.String(255), nullable=True),
        sa.Column("secrets", sa.JSON, nullable=False),
        sa.Column("placed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('placed', 'refunded', 'settled')", name="bets_state"),
        sa.CheckConstraint("funding IN ('cash', 'ticket', 'free')", name="bets_funding"),
        sa.CheckConstraint("amount >= 0 AND rake >= 0", name="bets_amounts"),
    )
    op.create_index("bets_pool", "bets", ["pool_uid"])
    op.create_index("bets_user", "bets", ["user_uid"])
    dialect = op.get_bind().dialect.name
    for statement in SQLITE_GUARDS if dialect == "sqlite" else POSTGRES_GUARDS:
        op.execute(statement)
