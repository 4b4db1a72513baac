"""The README's ``--workers`` block, run as a reader would run it."""

from __future__ import annotations

import json
from pathlib import Path

from support.readme import marked_block, run_block

MARKER = "<!-- tested by tests/e2e/test_readme_workers.py"


def test_the_workers_block_serves_from_two_processes_and_stops_them_gracefully(
    tmp_path: Path,
) -> None:
    code, stdout, stderr = run_block(marked_block(MARKER), tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("HTTP ")] == ["HTTP 200"] * 2, report
    answers = [json.loads(line) for line in lines if not line.startswith("HTTP ")]
    assert all("secrets" in answer for answer in answers), report
    # Two workers started, and both shut down gracefully on the block's `kill %1`.
    assert stderr.count("Application startup complete") == 2, report
    assert stderr.count("Application shutdown complete") == 2, report
