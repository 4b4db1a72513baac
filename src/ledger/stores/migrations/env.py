"""Alembic environment: runs on the connection :mod:`ledger.stores.migrations` hands in."""

from __future__ import annotations

from alembic import context

from ledger.stores import chain_tables, limit_tables  # noqa: F401 - their tables join the metadata
from ledger.stores.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
