"""Stores: one UnitOfWork port (:mod:`.base`), one module per database.

Only this package imports SQLAlchemy or a database driver.
"""

from __future__ import annotations

from typing import Any

from .base import AccountBalance, CheckReport, PoolTotals, Retry, StatementRow, Store, UnitOfWork

__all__ = [
    "AccountBalance",
    "CheckReport",
    "PoolTotals",
    "Retry",
    "StatementRow",
    "Store",
    "UnitOfWork",
    "open_store",
]


def open_store(
    url: str, *, migrate: bool | None = None, create: bool = True, **options: Any
) -> Store:
    """Open the store a SQLAlchemy-style URL names.

    ``sqlite:///path/ledger.db`` upgrades its schema itself unless ``migrate=False``, and creates
    the file (and its directories) unless ``create=False``;
    ``postgresql+psycopg://...`` (also ``postgresql://`` and ``postgres://``) expects
    ``ledger db upgrade`` to have run, unless ``migrate=True``.
    """
    if url.startswith("sqlite"):
        from .sqlite import SqliteStore

        migrate = True if migrate is None else migrate
        return SqliteStore(url, migrate=migrate, create=create, **options)
    if url.startswith(("postgres://", "postgresql")):
        from .postgres import PostgresStore

        return PostgresStore(url, migrate=bool(migrate), **options)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:/// or postgresql://")
