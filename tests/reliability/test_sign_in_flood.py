"""A flood of console sign-ins without credentials, against a real ``ledger serve`` at the
production scrypt cost: ``/ready`` and a Place Bet stay within twice their unflooded latency.

The flood runs in a process of its own (64 connections, each from an address of its own
through the trusted proxy), so that the test's measuring client never waits for the GIL behind
it. It is started and killed in turns, and the latencies of each condition are the medians over
all its turns: the other load on a shared machine drifts over seconds, and both conditions see
the same drift.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.httpkit import PLACE, dumps, headers, server_env
from support.killable import LedgerProcess
from support.operator_calls import deposit
from support.payloads import entry, place

pytestmark = pytest.mark.slow

SAMPLES = 40
ROUNDS = 4
CONNECTIONS = 64

# Each thread posts the sign-in form with a made-up form token (its cookie and its field agree,
# which is all a browser proves), an unknown name and a wrong password, from a fresh address.
FLOOD = """
import itertools, sys, threading, httpx
url, connections = sys.argv[1], int(sys.argv[2])
token = "t" * 43
def flood(n):
    with httpx.Client(base_url=url, timeout=60) as http:
        for i in itertools.count():
            try:
                http.post(
                    "/console/sign-in",
                    data={"name": f"nobody{i}", "password": "wrong password", "csrf": token},
                    cookies={"ledger_console_sign_in": token},
                    headers={"x-forwarded-for": f"10.{n}.{i // 250 % 250}.{i % 250 + 1}"},
                )
            except httpx.HTTPError:
                pass
for n in range(connections):
    threading.Thread(target=flood, args=(n,), daemon=True).start()
threading.Event().wait()
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LedgerProcess]:
    env = server_env(f"sqlite:///{tmp_path}/wallet.db", LEDGER_TRUSTED_PROXIES="127.0.0.1")
    with LedgerProcess(tmp_path, env) as process:
        yield process


def sample(http: httpx.Client, first_bet: int) -> tuple[list[float], list[float]]:
    """The seconds of SAMPLES ``/ready`` and SAMPLES Place Bets, in turns."""
    ready, placed = [], []
    for n in range(SAMPLES):
        started = time.perf_counter()
        assert http.get("/ready").status_code == 200
        ready.append(time.perf_counter() - started)
        body = dumps(place(entry(first_bet + n, user="rich", amount="1.00", rake="0.10")))
        started = time.perf_counter()
        answer = http.post("/bets", content=body, headers=headers(PLACE))
        placed.append(time.perf_counter() - started)
        assert answer.status_code == 200, answer.text
    return ready, placed


def flooding(url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", FLOOD, url, str(CONNECTIONS)])


def test_a_sign_in_flood_never_delays_ready_or_a_place_bet(server: LedgerProcess) -> None:
    quiet: tuple[list[float], list[float]] = ([], [])
    flooded: tuple[list[float], list[float]] = ([], [])
    refused: list[int] = []
    with httpx.Client(base_url=server.url, timeout=60) as http:
        deposit(http, "rich", "100000.00")
        sample(http, 1)  # warm-up: connections, the writer, the statement caches
        for turn in range(ROUNDS):
            ready, placed = sample(http, 10_000 + turn * SAMPLES)
            quiet[0].extend(ready)
            quiet[1].extend(placed)
            flood = flooding(server.url)
            try:
                time.sleep(2)  # every connection open and posting
                refused.append(
                    http.post(
                        "/console/sign-in",
                        data={"name": "x", "password": "y", "csrf": "t" * 43},
                        headers={"cookie": "ledger_console_sign_in=" + "t" * 43},
                    ).status_code
                )
                ready, placed = sample(http, 20_000 + turn * SAMPLES)
                flooded[0].extend(ready)
                flooded[1].extend(placed)
            finally:
                flood.kill()
                flood.wait()
            time.sleep(3)  # what the flood had in flight is answered
    ready_ratio = statistics.median(flooded[0]) / statistics.median(quiet[0])
    placed_ratio = statistics.median(flooded[1]) / statistics.median(quiet[1])
    print(f"flooded / quiet, medians: /ready {ready_ratio:.2f}, Place Bet {placed_ratio:.2f}")
    assert 429 in refused  # the flood was on, and was being turned away
    assert ready_ratio <= 2
    assert placed_ratio <= 2
