"""The schema's revision, known and read without importing Alembic.

Every store checks at start-up that its database is at the newest migration; importing Alembic
for that cost every ``ledger`` command 80 to 170 ms of CPU (``python -X importtime``), though
an upgrade is needed once per release. Alembic is imported only when one is
(:func:`ledger.stores.migrations.upgrade`).

The rule this relies on: each migration's file name starts with its revision id
(``0018_sealed_per_transaction.py`` is revision ``"0018"``), and ids sort in migration order;
``tests/stores/test_migrations.py`` checks :func:`head` against Alembic's own answer.
"""

from __future__ import annotations

import functools
from pathlib import Path

from sqlalchemy import Connection, inspect, text

__all__ = ["head", "stored"]

_VERSIONS = Path(__file__).parent / "migrations" / "versions"


@functools.cache
def head() -> str:
    """The newest migration this code knows."""
    return max(path.name.partition("_")[0] for path in _VERSIONS.glob("[0-9]*_*.py"))


def stored(connection: Connection) -> str | None:
    """The migration the database is at, or ``None`` for a database without the schema."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    found = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return None if found is None else str(found)
