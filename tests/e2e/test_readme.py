"""The README's commands, run as a reader would run them."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from ledger.http.logs import fingerprint
from support.httpkit import OPERATOR, free_port

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- tested by tests/test_readme.py"


def marked_block(marker: str) -> str:
    """The first ```sh block after ``marker`` in the README."""
    text = README.read_text()
    after = text[text.index(marker) :]
    start = after.index("```sh\n") + len("```sh\n")
    return after[start : after.index("\n```", start)]


def clean_environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    # curl reads $CURL_HOME/.curlrc: the test's one addition, printing each answer's status.
    return {**env, "HOME": str(home), "CURL_HOME": str(home)}


def test_running_it_for_real_block_works_as_written(tmp_path: Path) -> None:
    block = marked_block(MARKER)
    assert "kill %1" in block
    port = free_port()
    bin_dir = Path(sys.executable).parent  # the .venv/bin/ the README means
    script = block.replace("8000", str(port)).replace(".venv/bin/", f"{bin_dir}/")
    (tmp_path / ".curlrc").write_text('write-out = "\\nHTTP %{http_code}\\n"\n')
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,  # the server's default database, ./ledger.db, lands here
        env=clean_environment(tmp_path),
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
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert process.returncode == 0, report
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


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


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
