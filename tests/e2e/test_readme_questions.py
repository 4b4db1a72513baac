"""The README's "Answering an operator's questions" blocks, run as a reader would run them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from support.readme import marked_block, run_block


def test_where_is_this_request_id_block_works_as_written(tmp_path: Path) -> None:
    block = marked_block("where is this request id -->")
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
