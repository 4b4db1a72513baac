"""Stores: narrow ports, one module per concern, one module per database.

- :mod:`.port`: the ports (:class:`UnitOfWork` that writes, :class:`Reads`, :class:`Audit`,
  :class:`Store`); :mod:`.base`: the records they take and return;
- :mod:`.sql`: the SQL unit of work, its lifecycle and its writes; :mod:`.reads`: the reads and
  the audit over a read-only connection, with :mod:`.queries` (reports), :mod:`.directory`,
  :mod:`.events`, :mod:`.deliveries` and :mod:`.audit` (``check()``, re-proving the invariants);
- :mod:`.dialect`: the hooks a database supplies, implemented by :mod:`.sqlite` and
  :mod:`.postgres`;
- :mod:`.schema`: the one SQLAlchemy Core schema; :mod:`.migrations`: Alembic.

Only this package imports SQLAlchemy, Alembic or a database driver.
"""

from __future__ import annotations

from typing import Any

from .base import (
    AccountBalance,
    BetRecord,
    CheckReport,
    ClosingOutcome,
    DeliveryCount,
    HoldRow,
    HourTotals,
    HouseTotals,
    PoolTotals,
    PostingRecord,
    Retry,
    Staged,
    StaleRule,
    StatementRow,
    TournamentRecord,
    UserRecord,
)
from .port import Audit, Limits, Reads, Store, UnitOfWork

__all__ = [
    "AccountBalance",
    "Audit",
    "BetRecord",
    "CheckReport",
    "ClosingOutcome",
    "DeliveryCount",
    "HoldRow",
    "HourTotals",
    "HouseTotals",
    "Limits",
    "PoolTotals",
    "PostingRecord",
    "Reads",
    "Retry",
    "Staged",
    "StaleRule",
    "StatementRow",
    "Store",
    "TournamentRecord",
    "UnitOfWork",
    "UserRecord",
    "open_store",
]


def open_store(
    url: str,
    *,
    migrate: bool | None = None,
    create: bool = True,
    primary: bool = True,
    **options: Any,
) -> Store:
    """Open the store a SQLAlchemy-style URL names.

    ``sqlite:///path/ledger.db`` upgrades its schema itself unless ``migrate=False``, and creates
    the file (and its directories) unless ``create=False``;
    ``postgresql+psycopg://...`` (also ``postgresql://`` and ``postgres://``, libpq's host lists
    and SQLAlchemy's multi-host ``?host=h1:5432&host=h2:5432``) expects ``ledger db upgrade`` to
    have run, unless ``migrate=True``. ``primary=False`` opens a read replica: several hosts then
    do not imply ``target_session_attrs=read-write``.
    """
    if url.startswith("sqlite"):
        from .sqlite import SqliteStore

        migrate = True if migrate is None else migrate
        return SqliteStore(url, migrate=migrate, create=create, **options)
    if url.startswith(("postgres://", "postgresql")):
        from .postgres import PostgresStore

        return PostgresStore(url, migrate=bool(migrate), primary=primary, **options)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:/// or postgresql://")
