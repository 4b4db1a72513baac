"""The README's commands, run as a reader would run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from ledger.http.logs import fingerprint
from support.httpkit import OPERATOR
from support.readme import README, marked_block, run_block

MARKER = "<!-- tested by tests/test_readme.py"


def test_running_it_for_real_block_works_as_written(tmp_path: Path) -> None:
    block = marked_block(MARKER)
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
    # The final answer is the line the README shows under the last curl.
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


def test_operator_fingerprint_command_in_the_readme_matches_the_log() -> None:
    (command,) = re.findall(r"`(printf [^`]*sha256sum[^`]*)`", README.read_text())
    done = subprocess.run(
        ["bash", "-c", command],
        env={**os.environ, "LEDGER_OPERATOR_TOKEN": OPERATOR},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == fingerprint(OPERATOR)
