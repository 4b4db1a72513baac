"""Processes a test starts: how long to wait for them, and ending them whole.

A server's start-up took 2.5-3 s on a quiet 2-core machine and 15-28 s under a load of 10, so a
fixed wait either fails on a busy machine or wastes minutes on a quiet one: the wait scales with
the load, read again while waiting. Every process a test starts is its own session's leader, so
that ending it ends its whole group (workers, the writer process) even when the test failed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

# The longest a start-up may take on an idle machine, and whatever the load.
READY_SECONDS = 30.0
READY_CEILING = 600.0


def ready_deadline(base: float = READY_SECONDS) -> float:
    """Seconds a start-up may take now: ``base`` scaled by the load per core (never less)."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(READY_CEILING, base * max(1.0, load))


def waited_too_long(started: float, base: float = READY_SECONDS) -> bool:
    """True once ``ready_deadline(base)`` seconds have passed since ``started`` (monotonic)."""
    return time.monotonic() - started > ready_deadline(base)


def end_group(process: subprocess.Popen[Any], grace: float = 15.0) -> None:
    """Ask ``process`` and its group to stop (SIGTERM), then kill what is left of the group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
