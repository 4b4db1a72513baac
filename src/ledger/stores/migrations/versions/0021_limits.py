"""Responsible-gambling limits: limited users, limits, their history, exclusions, activity.

Revision ID: 0021
Revises: 0020

See :mod:`ledger.stores.limit_tables` for what each table holds. Key columns compare byte by
byte on Postgres (``COLLATE "C"``), as every key since 0015.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# Money as the other money columns hold it: NUMERIC on Postgres, BLOB affinity on SQLite.
Money = sa.Numeric().with_variant(sa.BLOB(), "sqlite")
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Stamp = sa.DateTime(timezone=True)


def _key(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def _exact(table: str, *names: str) -> list[sa.CheckConstraint]:
    postgres = op.get_bind().dialect.name == "postgresql"
    return [
        sa.CheckConstraint(
            f"{name} = trunc({name}) AND abs({name}) <= {10**38 - 1}"
            if postgres
            else f"{name} IS NULL OR typeof({name}) IN ('integer', 'text')",
            name=f"{table}_{name}_exact",
        )
        for name in names
    ]


def upgrade() -> None:
    op.create_table(
        "limited_users",
        sa.Column("user_uid", _key(255), primary_key=True),
        sa.Column("since", Stamp, nullable=False),
    )
    op.create_table(
        "limits",
        sa.Column("user_uid", _key(255), primary_key=True),
        sa.Column("currency", _key(16), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("period", sa.String(16), primary_key=True),
        sa.Column("amount", Money, nullable=True),
        sa.Column("pending", Money, nullable=True),
        sa.Column("pending_at", Stamp, nullable=True),
        sa.Column("updated_at", Stamp, nullable=False),
        *_exact("limits", "amount", "pending"),
    )
    op.create_table(
        "limit_changes",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("user_uid", _key(255), nullable=False),
        sa.Column("currency", _key(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("period", sa.String(16), nullable=False),
        sa.Column("old", Money, nullable=True),
        sa.Column("new", Money, nullable=True),
        sa.Column("asked_at", Stamp, nullable=False),
        sa.Column("effective_at", Stamp, nullable=False),
        sa.Column("by", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        *_exact("limit_changes", "old", "new"),
    )
    op.create_index("limit_changes_user", "limit_changes", ["user_uid", "id"])
    op.create_table(
        "exclusions",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("user_uid", _key(255), nullable=False),
        sa.Column("starts_at", Stamp, nullable=False),
        sa.Column("until", Stamp, nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("by", sa.String(255), nullable=False),
    )
    op.create_index("exclusions_user", "exclusions", ["user_uid", "id"])
    op.create_table(
        "limit_activity",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("user_uid", _key(255), nullable=False),
        sa.Column("currency", _key(16), nullable=False),
        sa.Column("at", Stamp, nullable=False),
        sa.Column("deposit", Money, nullable=False),
        sa.Column("stake", Money, nullable=False),
        sa.Column("returned", Money, nullable=False),
        *_exact("limit_activity", "deposit", "stake", "returned"),
    )
    op.create_index("limit_activity_window", "limit_activity", ["user_uid", "currency", "at"])
    op.create_index("limit_activity_at", "limit_activity", ["at"])


def downgrade() -> None:
    for table in ("limit_activity", "exclusions", "limit_changes", "limits", "limited_users"):
        op.drop_table(table)
