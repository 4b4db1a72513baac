"""Responsible-gambling limits: the movements of limited users summed per clock hour.

Revision ID: 0022
Revises: 0021

A check then reads a window as hourly sums and the movements of the one hour its start splits
(:mod:`ledger.stores.limit_hours`). The sums of the movements already recorded are written here.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

Money = sa.Numeric().with_variant(sa.BLOB(), "sqlite")
Stamp = sa.DateTime(timezone=True)
INT64 = 2**63


def _key(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def _exact(names: tuple[str, ...]) -> list[sa.CheckConstraint]:
    postgres = op.get_bind().dialect.name == "postgresql"
    return [
        sa.CheckConstraint(
            f"{name} = trunc({name}) AND abs({name}) <= {10**38 - 1}"
            if postgres
            else f"typeof({name}) IN ('integer', 'text')",
            name=f"limit_hours_{name}_exact",
        )
        for name in names
    ]


def upgrade() -> None:
    names = ("deposit", "stake", "returned")
    op.create_table(
        "limit_hours",
        sa.Column("user_uid", _key(255), primary_key=True),
        sa.Column("currency", _key(16), primary_key=True),
        sa.Column("hour", Stamp, primary_key=True),
        *(sa.Column(name, Money, nullable=False) for name in names),
        *_exact(names),
    )
    op.create_index("limit_hours_hour", "limit_hours", ["hour"])
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    activity = sa.table(
        "limit_activity",
        sa.column("user_uid"),
        sa.column("currency"),
        sa.column("at", Stamp),
        *(sa.column(name) for name in names),
    )
    sums: dict[tuple[str, str, datetime], list[int]] = {}
    for row in bind.execute(sa.select(activity)):
        at = row.at if row.at.tzinfo is not None else row.at.replace(tzinfo=UTC)
        key = (row.user_uid, row.currency, at.replace(minute=0, second=0, microsecond=0))
        found = sums.setdefault(key, [0, 0, 0])
        for index, name in enumerate(names):
            found[index] += int(getattr(row, name))
    hours = sa.table(
        "limit_hours",
        sa.column("user_uid"),
        sa.column("currency"),
        sa.column("hour", Stamp),
        *(sa.column(name) for name in names),
    )
    rows = [
        {
            "user_uid": user,
            "currency": currency,
            "hour": hour,
            **{
                name: str(value) if sqlite and not -INT64 <= value < INT64 else value
                for name, value in zip(names, values, strict=True)
            },
        }
        for (user, currency, hour), values in sums.items()
    ]
    if rows:
        bind.execute(sa.insert(hours), rows)


def downgrade() -> None:
    op.drop_table("limit_hours")
