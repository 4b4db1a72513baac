"""The servers a benchmark loads, and the load: a ``ledger serve`` or the bare Litestar echo on a
free port, wrk with the Place Bet script of (a), the body that script sends, and the deposits
and limits its users need."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from accounting import disk_wait_share, idle_share, machine_ticks, steal_share, tree_cpu_seconds

HERE = Path(__file__).resolve().parent


SECRET = "benchmark-secret-0123456789abcdef"


OPERATOR = "benchmark-operator-token"


CLIENT = "bench"


CONNECTIONS = 64


USERS = 64


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def auth_header() -> str:
    import jwt

    claims = {"role": "admin", "sub": "bench", "exp": int(time.time()) + 86_400}
    return f"Bearer {CLIENT} {jwt.encode(claims, SECRET, algorithm='HS256')}"


@contextlib.contextmanager
def server(command: list[str], port: int, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server process, wait until it answers, stop it afterwards."""
    process = subprocess.Popen(
        command,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code < 500:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {command}")
            time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def ledger_server(db: str, port: int, workers: int = 1) -> contextlib.AbstractContextManager[Any]:
    env = {
        "LEDGER_DATABASE_URL": db,
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
        # The production default: one JSON delivery line per request is part of the cost.
        "LEDGER_LOG_LEVEL": "INFO",
    }
    command = [sys.executable, "-m", "ledger", "serve", "--port", str(port)]
    if workers > 1:
        command += ["--workers", str(workers)]
    return server(command, port, env)


def echo_server(port: int) -> contextlib.AbstractContextManager[Any]:
    # Served as `ledger serve` serves: uvicorn, uvloop, httptools, one process, no access log.
    command = [
        sys.executable, "-m", "uvicorn", "echo:app", "--port", str(port), "--loop", "uvloop",
        "--http", "httptools", "--no-access-log", "--log-level", "warning", "--app-dir", str(HERE),
    ]  # fmt: skip
    return server(command, port, {})


def first_uid() -> int:
    """The first bet uid of a wrk run: the clock's milliseconds times 1,000. No run re-sends
    an earlier run's bets, in this process or in another on a database measured before
    (``--db``): a run of d seconds starts its successor's uids d * 10**6 higher, more than it
    places. Below 2**53 for centuries, so the wrk script's Lua numbers hold every uid exactly."""
    return time.time_ns() // 1_000_000 * 1_000


def wrk(
    port: int,
    path: str,
    users: int,
    seconds: int,
    connections: int = CONNECTIONS,
    pid: int | None = None,
    database: int | None = None,
) -> dict[str, Any]:
    """One wrk run; with ``pid``, also the server's CPU microseconds per request, and with
    ``database`` (a postmaster's pid) the database server's (every backend and worker)."""
    if shutil.which("wrk") is None:
        raise SystemExit("benchmark (a) needs wrk: apt-get install wrk")
    command = [
        "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
        "-s", str(HERE / "place_bet.lua"), f"http://127.0.0.1:{port}",
        "--", auth_header(), str(users), path, str(first_uid()),
    ]  # fmt: skip
    cpu_before = tree_cpu_seconds(pid) if pid is not None else (0.0, 0.0)
    db_before = tree_cpu_seconds(database, reaped=True)[0] if database is not None else 0.0
    machine_before = machine_ticks()
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    machine_after = machine_ticks()
    line = next(line for line in output.splitlines() if line.startswith("WRK_JSON "))
    data: dict[str, Any] = json.loads(line.removeprefix("WRK_JSON "))
    data["rps"] = data["requests"] / (data["duration_us"] / 1e6)
    data["machine_idle_share"] = idle_share(machine_before, machine_after)
    data["machine_steal_share"] = steal_share(machine_before, machine_after)
    data["machine_disk_wait_share"] = disk_wait_share(machine_before, machine_after)
    if pid is not None:
        cpu_after = tree_cpu_seconds(pid)
        requests = max(1, data["requests"])
        data["server_cpu_us_per_request"] = (cpu_after[0] - cpu_before[0]) * 1e6 / requests
        data["loop_cpu_us_per_request"] = (cpu_after[1] - cpu_before[1]) * 1e6 / requests
    if database is not None:
        db_after = tree_cpu_seconds(database, reaped=True)[0]
        data["database_cpu_us_per_request"] = (
            (db_after - db_before) * 1e6 / max(1, data["requests"])
        )
    return data


def place_bet_body(uid: int, users: int = USERS) -> bytes:
    """One new Place Bet of bet ``uid`` (user ``u<uid % users>``), exactly as the wrk script of
    (a) (``place_bet.lua``) sends it: for the benchmarks that submit it without HTTP."""
    return (
        f'{{"bets":[{{"user":{{"client":"bench","uid":"u{uid % users}","name":"Bench User",'
        f'"ip":"127.0.0.1"}},"pool":{{"client":"bench","game":"fantasy","uid":1,'
        f'"name":"Bench Cup","currency":"EUR","overdraw":"0.00","category":"admin_created",'
        f'"amount":1.00}},"bet":{{"uid":{uid},"uuid":"1|{uid}","base_amount":1.00,'
        f'"amount":1.00,"rake":0.10,"currency":"EUR"}}}}]}}'
    ).encode()


def fund(port: int, users: list[str], amount: str = "100000000.00") -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        for user in users:
            response = client.post(
                "/admin/deposits",
                headers={"Authorization": f"Bearer {OPERATOR}"},
                json={"user": user, "currency": "EUR", "amount": amount, "reference": user},
            )
            response.raise_for_status()


def limit_stakes(port: int, users: list[str], amount: str = "90000000.00") -> None:
    """A monthly stake limit for each user, far above what a run stakes."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        for user in users:
            response = client.put(
                f"/admin/users/{user}/limits",
                headers={"Authorization": f"Bearer {OPERATOR}"},
                json={"currency": "EUR", "kind": "stake", "period": "month", "amount": amount},
            )
            response.raise_for_status()
