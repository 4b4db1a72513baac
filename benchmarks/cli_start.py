"""What a ``ledger`` command costs to start, against importing the libraries it stands on.

    python benchmarks/cli_start.py [--rounds 15] [--json PATH]

Two pairs, each run alternately (A, B, A, B, ...) as whole processes, CPU time (user + system)
read from the operating system's accounting of the finished child:

- ``ledger --help`` against ``python -c "import click, sqlalchemy"`` (target: ratio <= 1.0);
- ``ledger balance u1`` on a SQLite file against ``python -c "import click, sqlalchemy,
  psycopg"`` (target: ratio <= 1.5).

Prints each command's median CPU and the median of the ratios pair by pair (a ratio holds when
the machine's speed drifts between pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PYTHON = sys.executable
LEDGER = [PYTHON, "-c", "from ledger.cli import main; main()"]


def cpu_of(command: list[str]) -> float:
    """CPU seconds (user + system) the finished ``command`` took."""
    before = os.times()
    done = subprocess.run(command, capture_output=True, check=False)
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"{command} failed: {done.stderr.decode()}")
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def pair(a: list[str], b: list[str], rounds: int) -> dict[str, Any]:
    cpu_of(a)  # warm-up: the file system's caches, compiled bytecode
    cpu_of(b)
    a_cpu, b_cpu = [], []
    for _ in range(rounds):
        a_cpu.append(cpu_of(a))
        b_cpu.append(cpu_of(b))
    ratios = [x / y for x, y in zip(a_cpu, b_cpu, strict=True)]
    return {
        "a_cpu_s": statistics.median(a_cpu),
        "b_cpu_s": statistics.median(b_cpu),
        "ratio": statistics.median(ratios),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        db = f"sqlite:///{Path(scratch) / 'cli.db'}"
        subprocess.run([*LEDGER, "deposit", "u1", "EUR", "1.00", "--db", db], check=True)
        results = {
            "help": pair(
                [*LEDGER, "--help"],
                [PYTHON, "-c", "import click, sqlalchemy"],
                options.rounds,
            ),
            "balance": pair(
                [*LEDGER, "balance", "u1", "--db", db],
                [PYTHON, "-c", "import click, sqlalchemy, psycopg"],
                options.rounds,
            ),
        }
    targets = {"help": 1.0, "balance": 1.5}
    print(f"{'command':<10} {'ledger CPU s':>13} {'baseline CPU s':>15} {'ratio':>7} {'target':>7}")
    for name, found in results.items():
        print(
            f"{name:<10} {found['a_cpu_s']:>13.3f} {found['b_cpu_s']:>15.3f} "
            f"{found['ratio']:>7.2f} {targets[name]:>7.2f}"
        )
    if options.json is not None:
        options.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
