"""Capacity: every amount and balance holds 38 digits exactly, on both stores.

Revision ID: 0002
Revises: 0001

Postgres: the money columns become NUMERIC with a CHECK that admits integers of at most 38 digits
only (NUMERIC(38, 0) would round a fraction written by hand instead of refusing it). SQLite,
whose integers are 64-bit: the money columns get BLOB affinity (so SQLite never converts what it
is given), holding an INTEGER while the value fits 64 bits and its canonical decimal text
beyond; CHECKs admit nothing else (no REAL, ever), and the balancing trigger adds with the exact
``ledger_sum`` aggregate that every ledger connection registers (ledger.stores.sqlite). A
connection without it cannot write a transaction row: the guard fails closed. A balance the
64-bit overflow had already turned into a REAL is recomputed, exactly, from its postings.
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

INT64_MAX = 2**63 - 1


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # One ALTER per table: each rewrites its table once.
        for table, columns in MONEY.items():
            clauses = [f"ALTER COLUMN {column} TYPE NUMERIC" for column in columns] + [
                f"ADD CONSTRAINT {table}_{column}_exact CHECK "
                f"({column} = trunc({column}) AND abs({column}) <= {10**38 - 1})"
                for column in columns
            ]
            op.execute(f"ALTER TABLE {table} {', '.join(clauses)}")
        return
    _upgrade_sqlite()


MONEY = {"accounts": ("balance",), "postings": ("amount",), "bets": ("amount", "rake", "payout")}


# --- SQLite ---------------------------------------------------------------------------------------


def exact(column: str) -> str:
    """An INTEGER, or the canonical text of an integer beyond 64 bits of at most 38 digits."""
    digits = f"ltrim({column}, '-')"
    return f"""(typeof({column}) = 'integer' OR (
        typeof({column}) = 'text'
        AND {column} NOT GLOB '--*'
        AND {digits} GLOB '[1-9]*'
        AND {digits} NOT GLOB '*[^0-9]*'
        AND length({digits}) BETWEEN 19 AND 38
        AND (length({digits}) > 19 OR {digits} > CASE WHEN {column} GLOB '-*'
             THEN '9223372036854775808' ELSE '9223372036854775807' END)))"""


def not_negative(column: str) -> str:
    # A text value compares greater than every number in SQLite: read its sign instead.
    return (
        f"(CASE typeof({column}) WHEN 'integer' THEN {column} >= 0 ELSE {column} NOT GLOB '-*' END)"
    )


ACCOUNTS = f"""CREATE TABLE accounts_new (
    name VARCHAR(300) NOT NULL,
    currency VARCHAR(16) NOT NULL,
    kind VARCHAR(16) NOT NULL,
    balance BLOB DEFAULT 0 NOT NULL,
    PRIMARY KEY (name, currency),
    CONSTRAINT accounts_kind CHECK (kind IN ('available', 'held', 'house')),
    CONSTRAINT accounts_balance_exact CHECK {exact("balance")},
    CONSTRAINT accounts_no_overdraft CHECK (kind = 'house' OR {not_negative("balance")})
)"""

POSTINGS = f"""CREATE TABLE postings_new (
    id INTEGER NOT NULL,
    txn_id BIGINT NOT NULL,
    account VARCHAR(300) NOT NULL,
    currency VARCHAR(16) NOT NULL,
    amount BLOB NOT NULL,
    bet_uid BIGINT,
    PRIMARY KEY (id),
    FOREIGN KEY(txn_id) REFERENCES transactions (id) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT postings_amount_exact CHECK {exact("amount")}
)"""

BETS = f"""CREATE TABLE bets_new (
    uid BIGINT NOT NULL,
    user_uid VARCHAR(255) NOT NULL,
    pool_uid BIGINT NOT NULL,
    currency VARCHAR(16) NOT NULL,
    amount BLOB NOT NULL,
    rake BLOB NOT NULL,
    funding VARCHAR(16) NOT NULL,
    state VARCHAR(16) NOT NULL,
    payout BLOB,
    payout_currency VARCHAR(16),
    ticket TEXT,
    request_uuid VARCHAR(255),
    secrets JSON NOT NULL,
    placed_at DATETIME NOT NULL,
    closed_at DATETIME,
    PRIMARY KEY (uid),
    CONSTRAINT bets_state CHECK (state IN ('placed', 'refunded', 'settled')),
    CONSTRAINT bets_funding CHECK (funding IN ('cash', 'ticket', 'free')),
    CONSTRAINT bets_amount_exact CHECK {exact("amount")},
    CONSTRAINT bets_rake_exact CHECK {exact("rake")},
    CONSTRAINT bets_payout_exact CHECK (payout IS NULL OR {exact("payout")}),
    CONSTRAINT bets_amounts CHECK ({not_negative("amount")} AND {not_negative("rake")})
)"""

INDEXES = [
    "CREATE INDEX postings_txn ON postings (txn_id)",
    "CREATE INDEX postings_account ON postings (account, currency, id)",
    "CREATE INDEX bets_pool ON bets (pool_uid)",
    "CREATE INDEX bets_user ON bets (user_uid)",
]

# The guards of 0001, dropped while the tables are rebuilt (a trigger naming a table that is
# being replaced would fail the rename) and created again below.
OLD_TRIGGERS = [
    "transactions_balanced",
    "postings_sealed",
    "postings_append_only_update",
    "postings_append_only_delete",
    "transactions_append_only_update",
    "transactions_append_only_delete",
    "bets_close_once",
    "bets_no_delete",
]

BET_FIELDS = ("user_uid", "pool_uid", "currency", "amount", "rake", "funding")

# As 0001's, except that the balancing trigger adds exactly (SQLite's SUM raises on 64-bit
# overflow and turns text into REAL). Equal values have one stored form, so the close-once
# trigger's comparisons stay exact.
TRIGGERS = [
    """CREATE TRIGGER transactions_balanced AFTER INSERT ON transactions
       WHEN EXISTS (SELECT 1 FROM postings WHERE txn_id = NEW.id
                    GROUP BY currency HAVING ledger_sum(amount) <> 0)
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
    f"""CREATE TRIGGER bets_close_once BEFORE UPDATE ON bets
        WHEN OLD.state <> 'placed' OR NEW.state = 'placed' OR NEW.uid <> OLD.uid
             {" ".join(f"OR NEW.{name} <> OLD.{name}" for name in BET_FIELDS)}
        BEGIN SELECT RAISE(ABORT, 'ledger: a bet is closed once, never changed otherwise'); END""",
    """CREATE TRIGGER bets_no_delete BEFORE DELETE ON bets
       BEGIN SELECT RAISE(ABORT, 'ledger: bets are never deleted'); END""",
]


def _stored(value: int) -> int | str:
    return value if -(2**63) <= value <= INT64_MAX else str(value)


def _upgrade_sqlite() -> None:
    bind = op.get_bind()
    for name in OLD_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute(ACCOUNTS)
    op.execute(
        "INSERT INTO accounts_new (name, currency, kind, balance) "
        "SELECT name, currency, kind, balance FROM accounts WHERE typeof(balance) = 'integer'"
    )
    # A balance that overflowed became a REAL: the postings, each a 64-bit integer, still say
    # exactly what it is. Summed here in Python, which cannot overflow.
    broken = bind.exec_driver_sql(
        "SELECT name, currency, kind FROM accounts WHERE typeof(balance) <> 'integer'"
    ).all()
    for name, currency, kind in broken:
        amounts = bind.exec_driver_sql(
            "SELECT amount FROM postings WHERE account = ? AND currency = ?", (name, currency)
        )
        total = sum(int(amount) for (amount,) in amounts)
        bind.exec_driver_sql(
            "INSERT INTO accounts_new (name, currency, kind, balance) VALUES (?, ?, ?, ?)",
            (name, currency, kind, _stored(total)),
        )
    op.execute(POSTINGS)
    op.execute(
        "INSERT INTO postings_new SELECT id, txn_id, account, currency, amount, bet_uid "
        "FROM postings"
    )
    op.execute(BETS)
    op.execute(
        "INSERT INTO bets_new SELECT uid, user_uid, pool_uid, currency, amount, rake, funding, "
        "state, payout, payout_currency, ticket, request_uuid, secrets, placed_at, closed_at "
        "FROM bets"
    )
    for table in ("accounts", "postings", "bets"):
        op.execute(f"DROP TABLE {table}")
        op.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
    for statement in (*INDEXES, *TRIGGERS):
        op.execute(statement)
