"""Running the shell blocks of the README and of ``docs/`` as a reader would: from ``.venv/bin/``,
on a free port."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.httpkit import free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def marked_block(marker: str, language: str = "sh", path: Path | str = README) -> str:
    """The first ```sh (or ``language``) block after ``marker`` in ``path`` (default the README;
    a relative path is taken from the repository's root, e.g. ``docs/events.md``)."""
    text = (ROOT / path).read_text()
    after = text[text.index(marker) :]
    start = after.index(f"```{language}\n") + len(f"```{language}\n")
    return after[start : after.index("\n```", start)]


def clean_environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    # curl reads $CURL_HOME/.curlrc: the test's one addition, printing each answer's status.
    return {**env, "HOME": str(home), "CURL_HOME": str(home)}


def run_block(block: str, directory: Path) -> tuple[int, str, str]:
    """Run ``block`` in ``directory`` (the server's default ./ledger.db lands there), its port
    8000 replaced by a free one; each curl answer is followed by a line ``HTTP <status>``.
    Answers ``(exit code, stdout, stderr)`` once the block and its background server ended;
    fails when something the block started is still running 30 s after it ended."""
    port = free_port()
    bin_dir = Path(sys.executable).parent  # the .venv/bin/ the README means
    script = block.replace("8000", str(port)).replace(".venv/bin/", f"{bin_dir}/")
    (directory / ".curlrc").write_text('write-out = "\\nHTTP %{http_code}\\n"\n')
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=directory,
        env=clean_environment(directory),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
        # `kill %1` asks the server to stop; give it the time to, before making sure.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _alive(process.pid):
            time.sleep(0.1)
        # A block stops what it started: a reader must not be left with a server running.
        left_running = _alive(process.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert not left_running, f"the block left processes running\n{stdout}\n{stderr[-3000:]}"
    return process.returncode, stdout, stderr


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
