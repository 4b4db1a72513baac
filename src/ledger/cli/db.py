"""``ledger db``: its schema, a backup of a live SQLite ledger, a copy into Postgres."""

from __future__ import annotations

import click

from .. import views
from ..backup import backup_sqlite
from ..store_copy import copy_sqlite_to_postgres
from .common import db_option
from .opening import opened


@click.group()
def db() -> None:
    """The database: upgrade its schema, back it up, copy it into Postgres."""


@db.command("upgrade")
@db_option
def db_upgrade(db: str) -> None:
    """Create or upgrade the schema to the newest migration (Alembic)."""
    with opened(db, migrate=True):
        pass
    click.echo("schema is up to date")


@db.command("backup")
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option(
    "--db",
    "db",
    envvar="LEDGER_DATABASE_URL",
    default="sqlite:///ledger.db",
    show_default=True,
    help="The SQLite ledger to copy (a Postgres URL is refused: use pg_dump or a base backup).",
)
def db_backup(dest: str, db: str) -> None:
    """Copy a live SQLite ledger to DEST (never overwritten) and check the copy.

    The server may keep writing meanwhile. Exit 0 when the copy passes `ledger check`, 1 when
    it does not or when no copy was made.
    """
    result = backup_sqlite(db, dest)
    click.echo(f"copied {result.source} to {result.destination} ({result.size} bytes)")
    for line in views.check_lines(result.report):
        click.echo(f"check: {line}")
    if not result.report.ok:
        click.echo(
            "error: backup.check_failed: the copy fails `ledger check` (so does the source): "
            f"kept at {result.destination} for inspection",
            err=True,
        )
        raise SystemExit(1)


@db.command("copy")
@click.argument("target")
@click.option(
    "--db",
    "db",
    envvar="LEDGER_DATABASE_URL",
    default="sqlite:///ledger.db",
    show_default=True,
    help="The SQLite ledger to copy (its servers stopped).",
)
def db_copy(target: str, db: str) -> None:
    """Copy the SQLite ledger of --db into TARGET, an empty Postgres database made by
    `ledger db upgrade --db TARGET`, then check the copy. Exit 0 when it passes `ledger check`."""
    result = copy_sqlite_to_postgres(db, target)
    total = sum(result.rows.values())
    click.echo(f"copied {total} rows of {len(result.rows)} tables")
    for line in views.check_lines(result.report):
        click.echo(f"check: {line}")
    if not result.report.ok:
        click.echo("error: ledger.check_failed: the copy fails `ledger check`", err=True)
        raise SystemExit(1)
