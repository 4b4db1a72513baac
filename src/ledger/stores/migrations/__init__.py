"""Alembic migrations of the ledger schema, run programmatically (``ledger db upgrade``).

The scripts live in this package so that an installed wheel can migrate a database without an
``alembic.ini`` next to it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

__all__ = ["current_revision", "head_revision", "upgrade"]

_HERE = Path(__file__).parent


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_HERE))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest migration this code knows."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(connection: Connection) -> str | None:
    """The migration the database is at, or ``None`` for an empty database."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` (the newest by default) in the caller's transaction."""
    if connection.dialect.name == "postgresql":
        # Replicas starting together must not run the same migration twice.
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(7355608)")
    # Alembic keeps the running migration's context in a module global: two threads of one
    # process upgrading at once (a ledger opened ahead of the server's start-up beside another
    # store) took each other's context and failed with KeyError: 'config'. One at a time.
    with _UPGRADING:
        command.upgrade(_config(connection), revision)


_UPGRADING = threading.Lock()
