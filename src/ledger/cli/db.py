"""``ledger db``: the schema."""

from __future__ import annotations

import click

from .common import db_option
from .opening import opened


@click.group()
def db() -> None:
    """Schema management."""


@db.command("upgrade")
@db_option
def db_upgrade(db: str) -> None:
    """Create or upgrade the schema to the newest migration (Alembic)."""
    with opened(db, migrate=True):
        pass
    click.echo("schema is up to date")
