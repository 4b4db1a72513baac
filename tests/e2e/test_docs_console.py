"""The first-operator block of docs/console.md, run as a reader would run it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from support.httpkit import free_port
from support.readme import clean_environment, marked_block

MARKER = "<!-- tested by tests/e2e/test_docs_console.py"


def test_first_operator_block_works_as_written(tmp_path: Path) -> None:
    block = marked_block(MARKER, path="docs/console.md")
    bin_dir = Path(sys.executable).parent  # the .venv/bin/ the page means
    script = block.replace("8000", str(free_port())).replace(".venv/bin/", f"{bin_dir}/")
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,  # the default database, ./ledger.db, lands here
        env=clean_environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert process.returncode == 0, report
    lines = stdout.splitlines()
    assert "added alice (admin)" in lines, report
    assert "alice\tadmin\tactive" in lines, report
    (answer,) = [json.loads(line) for line in lines if line.startswith("{")]
    assert [(item["operator"], item["action"], item["target"]) for item in answer["audit"]] == [
        ("cli", "operator_add", "alice")
    ], report
    assert any("\toperator_add\talice\tok\t" in line for line in lines), report
