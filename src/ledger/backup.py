"""``ledger db backup DEST``: a consistent copy of a live SQLite ledger, checked before it counts.

The copy is taken with SQLite's online backup API (:meth:`sqlite3.Connection.backup`) in one
step, inside one read transaction: in WAL mode a reader never blocks the writers, so the server
keeps answering while the copy is made, and the copy is the database as of one commit. It is
written to a temporary file beside ``DEST``, opened as a ledger and proven by the same check as
``ledger check`` (:meth:`ledger.Ledger.check`), synced to disk, and only then given its name,
which never replaces an existing file.

Postgres is refused: its own tools (``pg_dump``, base backups with WAL archiving) copy a live
cluster consistently, and a restore is proven with ``ledger check`` as here.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import LedgerError
from .service import open_ledger
from .stores.base import CheckReport

__all__ = ["BackupResult", "backup_sqlite"]

POSTGRES_ADVICE = (
    "ledger db backup copies SQLite databases only; back a Postgres ledger up with pg_dump "
    "(a logical copy) or pg_basebackup with WAL archiving (point-in-time recovery), then run "
    "`ledger check` after any restore (docs/operations/backup-and-restore.md)"
)


@dataclass(frozen=True, slots=True)
class BackupResult:
    """Where the copy went, how large it is, and what the ledger's check said of it."""

    source: Path
    destination: Path
    size: int
    report: CheckReport


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite:///`` URL names; any other URL is refused with advice."""
    if url.startswith(("postgres://", "postgresql")):
        raise LedgerError(POSTGRES_ADVICE, key="backup.unsupported_store")
    if not url.startswith("sqlite"):
        raise LedgerError(f"unsupported database URL {url!r}", key="backup.unsupported_store")
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:":
        raise LedgerError(
            "an in-memory database has nothing to copy", key="backup.unsupported_store"
        )
    path = Path(database).expanduser()
    if not path.is_file():
        raise LedgerError(f"no SQLite database at {str(path)!r}: check --db", key="store.not_found")
    return path


def backup_sqlite(url: str, destination: str | os.PathLike[str]) -> BackupResult:
    """Copy the live SQLite ledger ``url`` names to ``destination``, which must not exist.

    Raises :class:`LedgerError` (``backup.exists``, ``backup.unsupported_store``,
    ``store.not_found``, ``backup.failed``) and leaves nothing behind when it does. A copy that
    fails the ledger's check is kept (it is what the source holds) and reported as such.
    """
    source = sqlite_path(url)
    target = Path(destination).expanduser()
    if target.exists() or target.is_symlink():
        raise LedgerError(
            f"{str(target)!r} exists: a backup never overwrites a file; choose a new name",
            key="backup.exists",
        )
    if not target.parent.is_dir():
        raise LedgerError(f"no directory {str(target.parent)!r}", key="backup.failed")
    handle, scratch_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".partial", dir=target.parent
    )
    os.close(handle)
    scratch = Path(scratch_name)
    try:
        _copy(source, scratch)
        report = _check(scratch)
        _fsync(scratch)
        try:
            # A hard link gives the copy its name and fails if the name was taken meanwhile.
            os.link(scratch, target)
        except FileExistsError:
            raise LedgerError(
                f"{str(target)!r} appeared during the backup; nothing was overwritten",
                key="backup.exists",
            ) from None
        _fsync(target.parent)
    finally:
        _remove(scratch)
    return BackupResult(source, target, target.stat().st_size, report)


def _copy(source: Path, scratch: Path) -> None:
    try:
        with (
            contextlib.closing(sqlite3.connect(source, timeout=30.0)) as live,
            contextlib.closing(sqlite3.connect(scratch)) as copy,
        ):
            # pages=-1: the whole database in one step, so in one read transaction of the
            # source: the copy is one commit's state, however many writers carry on.
            live.backup(copy, pages=-1)
    except sqlite3.Error as error:
        raise LedgerError(f"the copy failed: {error}", key="backup.failed") from None


def _check(scratch: Path) -> CheckReport:
    # migrate=False: the copy is verified as it is, never altered; group_commit=False: no
    # writer thread for a read.
    book = open_ledger(f"sqlite:///{scratch}", migrate=False, create=False, group_commit=False)
    try:
        return book.check()
    finally:
        book.close()


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove(scratch: Path) -> None:
    scratch.unlink(missing_ok=True)
    for suffix in ("-wal", "-shm", "-journal", "-writer"):
        side = scratch.with_name(scratch.name + suffix)
        # Only what the check left empty: a log with frames in it is never thrown away.
        if side.is_file() and (suffix != "-wal" or side.stat().st_size == 0):
            side.unlink(missing_ok=True)
