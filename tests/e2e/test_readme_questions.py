"""The README's "Answering an operator's questions" blocks, run as a reader would run them."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.httpkit import free_port

README = Path(__file__).resolve().parents[2] / "README.md"


def block_after(marker: str) -> str:
    """The first ```sh block after ``marker`` in the README."""
    text = README.read_text()
    after = text[text.index(marker) :]
    start = after.index("```sh\n") + len("```sh\n")
    return after[start : after.index("\n```", start)]


def run_block(block: str, directory: Path) -> tuple[int, str, str]:
    """Run a README block in ``directory`` (its ./ledger.db) with a free port, to its end."""
    port = free_port()
    bin_dir = Path(sys.executable).parent  # the .venv/bin/ the README means
    script = block.replace("8000", str(port)).replace(".venv/bin/", f"{bin_dir}/")
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    (directory / ".curlrc").write_text('write-out = "\\nHTTP %{http_code}\\n"\n')
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=directory,
        env={**env, "HOME": str(directory), "CURL_HOME": str(directory)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=120)
        deadline = time.monotonic() + 30  # `kill %1` asks the server to stop: let it
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, stdout, stderr


def test_where_is_this_request_id_block_works_as_written(tmp_path: Path) -> None:
    block = block_after("where is this request id -->")
    code, stdout, stderr = run_block(block, tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    lines = [line for line in stdout.splitlines() if line.strip()]
    statuses = [line for line in lines if line.startswith("HTTP ")]
    assert statuses == ["HTTP 402", "HTTP 200", "HTTP 200", "HTTP 200"], report
    answers = [line for line in lines if not line.startswith("HTTP ")]
    refused, _deposit, _placed, found, paid = (json.loads(line) for line in answers[:5])
    assert refused["error"] == "user.insufficient_funds", report
    [poor] = found["deliveries"]
    assert (poor["request_id"], poor["status"], poor["error"]) == (
        "7c1e5a52-poor",
        402,
        "user.insufficient_funds",
    ), report
    [accepted] = paid["deliveries"]
    assert (accepted["status"], accepted["bet_uids"]) == (200, [70]), report
    exported = list(csv.DictReader(io.StringIO("\n".join(answers[5:]))))
    assert [row["request_id"] for row in exported] == ["7c1e5a52-paid", "7c1e5a52-poor"], report
