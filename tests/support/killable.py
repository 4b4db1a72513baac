"""A real ``ledger serve`` that can be SIGKILLed and started again on the same port and
database, like a crashed replica brought back by its supervisor (:class:`LedgerProcess`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from support.httpkit import (
    free_port,
    ledger_command,
)
from support.processes import READY_SECONDS, waited_too_long


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
