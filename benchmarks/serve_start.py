"""How long ``ledger serve`` takes to answer ``/health``, and to refuse a port already in use.

    python benchmarks/serve_start.py [--rounds 5] [--json PATH]

Each round starts ``ledger serve`` on a free port over a new SQLite file (development mode, the
writer process on, as the Quickstart runs it), polls ``/health`` every 10 ms and reports the wall
time from the spawn to the first 200, and the CPU time the server's process had used by then
(``/proc``; the writer process is not counted). Then it starts a second server on the port the
first one holds and reports how long that one takes to exit. Prints the medians.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PYTHON = sys.executable
LEDGER = [PYTHON, "-c", "from ledger.cli import main; main()"]
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def healthy(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def environment() -> dict[str, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    return {**clean, "LEDGER_LOG_LEVEL": "WARNING"}


def one_round(scratch: Path, number: int) -> dict[str, float]:
    port = free_port()
    db = f"sqlite:///{scratch / f'serve-{number}.db'}"
    command = [*LEDGER, "serve", "--port", str(port), "--db", db]
    started = time.monotonic()
    server = subprocess.Popen(
        command,
        env=environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while not healthy(port):
            if server.poll() is not None:
                raise SystemExit(f"ledger serve exited with {server.returncode}")
            if time.monotonic() - started > 300:
                raise SystemExit("ledger serve did not answer /health within 300 s")
            time.sleep(0.01)
        ready = time.monotonic() - started
        cpu = cpu_seconds(server.pid)
        second = time.monotonic()
        refused = subprocess.run(command, env=environment(), capture_output=True, check=False)
        busy = time.monotonic() - second
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    return {
        "ready_s": ready,
        "ready_cpu_s": cpu,
        "busy_port_s": busy,
        "busy_port_exit": float(refused.returncode),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        one_round(Path(scratch), 0)  # warm-up: the file system's caches, compiled bytecode
        rounds = [one_round(Path(scratch), number + 1) for number in range(options.rounds)]
    results: dict[str, Any] = {
        key: statistics.median(item[key] for item in rounds) for key in rounds[0]
    }
    results["load_average"] = os.getloadavg()[0]
    print(f"{'figure':<32} {'median':>8}")
    print(f"{'ready /health, wall s':<32} {results['ready_s']:>8.2f}")
    print(f"{'ready /health, server CPU s':<32} {results['ready_cpu_s']:>8.2f}")
    print(f"{'busy port refused, wall s':<32} {results['busy_port_s']:>8.2f}")
    print(f"{'busy port exit status':<32} {results['busy_port_exit']:>8.0f}")
    print(f"load average (1 min) {results['load_average']:.2f}")
    if options.json is not None:
        options.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
