"""Sign-in failures counted per operator and address; the audit log append-only.

Revision ID: 0019
Revises: 0018

``operator_failures`` holds one row per operator and client address with failed sign-ins: the
count is incremented in one statement before the password is checked, so concurrent wrong
passwords cannot outrun the lockout, and a lock from one address leaves the others open
(ledger.operators). The columns ``operators.failed_attempts`` and ``locked_until`` stay for old
readers and are no longer written.

``operator_audit`` refuses UPDATE and DELETE (and TRUNCATE on Postgres) like the journal.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

Stamp = sa.DateTime(timezone=True)

SQLITE_AUDIT = [
    f"""CREATE TRIGGER operator_audit_append_only_{verb} BEFORE {verb.upper()} ON operator_audit
        BEGIN SELECT RAISE(ABORT, 'ledger: the audit log is append-only'); END"""
    for verb in ("update", "delete")
]

POSTGRES_AUDIT = [
    """CREATE FUNCTION ledger_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'ledger: the audit log is append-only'
           USING ERRCODE = 'restrict_violation';
       END $$""",
    """CREATE TRIGGER operator_audit_append_only BEFORE UPDATE OR DELETE ON operator_audit
       FOR EACH ROW EXECUTE FUNCTION ledger_audit_append_only()""",
    """CREATE TRIGGER operator_audit_no_truncate BEFORE TRUNCATE ON operator_audit
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_audit_append_only()""",
]


def upgrade() -> None:
    op.create_table(
        "operator_failures",
        sa.Column("operator", sa.String(64), primary_key=True),
        sa.Column("address", sa.String(64), primary_key=True),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("locked_until", Stamp, nullable=True),
        sa.Column("last_at", Stamp, nullable=False),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_AUDIT if postgres else SQLITE_AUDIT:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER operator_audit_no_truncate ON operator_audit")
        op.execute("DROP TRIGGER operator_audit_append_only ON operator_audit")
        op.execute("DROP FUNCTION ledger_audit_append_only()")
    else:
        for verb in ("update", "delete"):
            op.execute(f"DROP TRIGGER operator_audit_append_only_{verb}")
    op.drop_table("operator_failures")
