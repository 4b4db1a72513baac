"""The Alembic migrations build exactly the schema the code's SQLAlchemy metadata describes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

import ledger
from ledger.stores.migrations import current_revision, head_revision
from ledger.stores.postgres import normalize_url
from ledger.stores.schema import metadata


def test_migrated_database_matches_the_schema_metadata(store_url: str) -> None:
    engine = create_engine(normalize_url(store_url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": False}
            )
            differences: list[Any] = compare_metadata(context, metadata)
            assert differences == []
            assert current_revision(connection) == head_revision()
            # The guards the metadata cannot describe are there too.
            names = set(inspect(connection).get_table_names())
            assert {"accounts", "transactions", "postings", "bets", "alembic_version"} <= names
    finally:
        engine.dispose()


def test_upgrading_an_up_to_date_database_changes_nothing(store_url: str) -> None:
    with ledger.open_ledger(store_url, migrate=True) as book:
        book.deposit("u1", "EUR", "1.00", "r1")
    with ledger.open_ledger(store_url, migrate=True) as book:
        assert book.balance("u1")[0].available == Decimal("1.00")
        assert book.check().ok
