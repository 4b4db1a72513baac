"""The reconciliation example of docs/reconciliation.md, run as a reader would run it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.httpkit import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reconciliation.md"
MARKER = "<!-- tested by tests/e2e/test_docs_reconciliation.py"


def block_and_output() -> tuple[str, str]:
    """The ```sh block after the marker, and the block of output the page shows after it."""
    after = PAGE.read_text().split(MARKER, 1)[1]
    start = after.index("```sh\n") + len("```sh\n")
    end = after.index("\n```", start)
    shown_start = after.index("```\n", end + 4) + len("```\n")
    return after[start:end], after[shown_start : after.index("\n```", shown_start)]


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_reconciliation_example_works_as_written_and_prints_what_it_shows(
    tmp_path: Path,
) -> None:
    block, shown = block_and_output()
    bin_dir = Path(sys.executable).parent  # the .venv/bin/ the page means
    script = block.replace("8000", str(free_port())).replace(".venv/bin/", f"{bin_dir}/")
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"

    assert process.returncode == 0, report
    printed = stdout.splitlines()
    # Every line the page shows is printed, but for the elided ids and "..." lines.
    for line in shown.splitlines():
        if "..." in line or line.startswith("{"):
            continue
        assert line in printed, f"{line!r} not printed\n{report}"
    assert printed.count("exit 1") == 1, report
    assert printed[-1].startswith('{"ok":false,"format":"csv"'), report
    differences = (tmp_path / "differences.csv").read_text().splitlines()
    assert len(differences) == 4, differences
