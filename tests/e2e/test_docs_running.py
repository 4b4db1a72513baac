"""The blocks of docs/operations/running.md, run as a reader would run them, and the operator
token's fingerprint command of docs/api.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from ledger.http.logs import fingerprint
from support.httpkit import OPERATOR
from support.readme import ROOT, marked_block, run_block

PAGE = "docs/operations/running.md"
MARKER = "<!-- tested by tests/e2e/test_docs_running.py: with a secret -->"
WORKERS = "<!-- tested by tests/e2e/test_docs_running.py: workers -->"


def test_running_it_for_real_block_works_as_written(tmp_path: Path) -> None:
    block = marked_block(MARKER, path=PAGE)
    assert "kill %1" in block
    code, stdout, stderr = run_block(block, tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    lines = [line for line in stdout.splitlines() if line.strip()]
    statuses = [line for line in lines if line.startswith("HTTP ")]
    assert statuses == ["HTTP 200"] * 4, report
    deposit, placed, settled, balances = [
        json.loads(line) for line in lines if not line.startswith("HTTP ")
    ]
    assert (deposit["applied"], deposit["amount"]) == (True, "100.00"), report
    assert "secrets" in placed, report
    assert settled == {"closed": 1, "unchanged": 0}, report
    # The final answer is the line the page shows under the last curl.
    (shown,) = [line for line in block.splitlines() if line.startswith('# {"user"')]
    assert json.dumps(balances, separators=(",", ":")) == shown.removeprefix("# "), report
    # The server's own lines: the operator's actions, from the caller's address, timestamped.
    operator = [json.loads(line) for line in stderr.splitlines() if '"msg":"operator"' in line]
    assert [(line["path"], line["status"]) for line in operator] == [
        ("/admin/deposits", 200),
        ("/admin/users/u1/balances", 200),
    ], report
    assert {line["ip"] for line in operator} == {"127.0.0.1"}
    iso_utc = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
    assert all(iso_utc.match(line["ts"]) for line in operator), report


def test_operator_fingerprint_command_in_the_docs_matches_the_log() -> None:
    (command,) = re.findall(
        r"`(printf [^`]*sha256sum[^`]*)`", (ROOT / "docs" / "api.md").read_text()
    )
    done = subprocess.run(
        ["bash", "-c", command],
        env={**os.environ, "LEDGER_OPERATOR_TOKEN": OPERATOR},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == fingerprint(OPERATOR)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_workers_block_serves_from_two_processes_and_stops_them_gracefully(
    tmp_path: Path,
) -> None:
    code, stdout, stderr = run_block(marked_block(WORKERS, path=PAGE), tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("HTTP ")] == ["HTTP 200"] * 2, report
    answers = [json.loads(line) for line in lines if not line.startswith("HTTP ")]
    assert all("secrets" in answer for answer in answers), report
    # Two workers started, and both shut down gracefully on the block's `kill %1`.
    assert stderr.count("Application startup complete") == 2, report
    assert stderr.count("Application shutdown complete") == 2, report
