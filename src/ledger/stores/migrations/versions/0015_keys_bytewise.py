"""Postgres: account names, currencies and user uids compare byte by byte (``COLLATE "C"``).

Revision ID: 0015
Revises: 0014

These text columns are keys: the accounts' (name, currency), the postings' account index, the
users' uid and the bets' user. Under the database's default collation every comparison of them
(each index insertion and lookup, each sort and grouping of a huge close) went through the C
library's ``strcoll``, and a sort could not use abbreviated keys; under ``"C"`` it is ``memcmp``.
Byte order of UTF-8 is also code point order, Python's: ``ORDER BY account, currency`` in SQL now
takes accounts in the order the Python writers' ``sorted()`` takes them, one lock order for both
whatever the server's locale. Equality is unchanged (the default collations are deterministic).
Under a linguistic default collation the order of some names changes (upper case before lower,
accented letters by code point): the users list pages by (first seen, uid), its cursor compared
in the same collation as its order, so paging stays exact; the house accounts are ASCII.

Measured on a settle of 1,000,000 participants on Postgres (``benchmarks/settle_split.py`` on
one template book copied for each run), with the close's temporary text columns in ``"C"`` too:
on the template altered in place, 31.0 -> 28.8 s (the postings insert 6.7 -> 4.9 s), part of
which is the ALTER's fresh rebuild of the indexes; on a template placed at this revision (with
0016), 29.3 to 30.0 s against 31.7 to 33.2 s before both. The server's default collation here is
``C.UTF-8``; under a linguistic one (``en_US.UTF-8``) each comparison costs more and the gain is
larger. The columns' indexes are rebuilt (no table rewrite): on a large journal, run it in a
maintenance window. SQLite's text comparison is bytewise already.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

KEYS = (
    ("accounts", "name", 300),
    ("accounts", "currency", 16),
    ("postings", "account", 300),
    ("postings", "currency", 16),
    ("users", "uid", 255),
    ("bets", "user_uid", 255),
)


def _collate(collation: str | None) -> None:
    for table, column, length in KEYS:
        op.alter_column(
            table,
            column,
            type_=sa.String(length, collation=collation),
            existing_type=sa.String(length),
        )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _collate("C")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _collate(None)
