"""Soak: the platform simulator with faults, round after round, against one server process.

Each round is ``ledger simulate --faults`` with a new seed (new users, tournaments and bets),
reconciled against the wallet's books. Meanwhile the server's resident memory (VmRSS) is sampled;
after a warm-up it must stay flat. The run is bounded: ``LEDGER_SOAK_SECONDS`` (default 120)
decides how long, at most 60 rounds.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from support.httpkit import CLIENT, OPERATOR, SECRET, ledger_command, server_env
from support.killable import LedgerProcess
from support.stored import ledger_check

SOAK_SECONDS = float(os.environ.get("LEDGER_SOAK_SECONDS", "120"))
MAX_ROUNDS = 60
# Allowed growth of VmRSS from the end of the warm-up to the end of the run.
RSS_GROWTH_KIB = 24 * 1024
# The answers a correct wallet gives a faulty platform: 200, 402 for the unfunded, and no answer
# for a delivery the simulator gave up on after a few milliseconds (its short_timeout fault).
EXPECTED_ANSWERS = {"200", "402", "no answer"}


def simulate(url: str, seed: int) -> subprocess.CompletedProcess[str]:
    command = [*ledger_command(), "simulate", url, "--client", CLIENT, "--secret", SECRET]
    return subprocess.run(
        [*command, "--operator-token", OPERATOR, "--no-progress", "--faults", "--seed", str(seed)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.mark.slow
def test_simulator_with_faults_soaks_with_flat_memory_and_no_mismatches(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/wallet.db"
    samples: list[tuple[float, int]] = []
    stop = threading.Event()
    with LedgerProcess(tmp_path, server_env(database)) as server:

        def sample() -> None:
            while not stop.wait(0.5):
                samples.append((time.monotonic(), server.rss_kib()))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        rounds: list[tuple[float, str]] = []
        try:
            for seed in range(1, MAX_ROUNDS + 1):
                result = simulate(server.url, 9000 + seed)
                assert result.returncode == 0, result.stdout + result.stderr
                assert "mismatches: 0" in result.stdout, result.stdout
                assert "journal check: ok" in result.stdout, result.stdout
                answers = re.search(r"^answers:\s+(.*)$", result.stdout, re.MULTILINE)
                assert answers is not None, result.stdout
                seen = {part.rsplit(" ", 1)[0] for part in answers.group(1).split(", ")}
                assert seen <= EXPECTED_ANSWERS, answers.group(1)
                rounds.append((time.monotonic(), answers.group(1)))
                if time.monotonic() - started > SOAK_SECONDS:
                    break
        finally:
            stop.set()
            sampler.join()
        errors = [line for line in server.delivery_lines() if line["status"] >= 500]
        assert not errors, errors[:5]
        assert "Traceback" not in server.output()
    assert len(rounds) >= 3, "too short a soak to judge memory"
    # Warm-up: the first third of the rounds (imports, caches, connection pools fill up).
    warm = rounds[len(rounds) // 3 - 1][0]
    after = [rss for moment, rss in samples if moment >= warm]
    baseline = after[0]
    tail = after[-max(1, len(after) // 10) :]
    growth = min(tail) - baseline
    assert growth < RSS_GROWTH_KIB, (
        f"VmRSS grew by {growth} KiB after warm-up (from {baseline} KiB); "
        f"samples: {[rss for _, rss in samples][:: max(1, len(samples) // 40)]}"
    )
    check = ledger_check(database)
    assert check.returncode == 0, check.stdout + check.stderr
