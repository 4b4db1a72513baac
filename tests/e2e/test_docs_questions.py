"""The blocks of docs/questions.md that talk to a server or the directory, run as a reader
would run them (the book commands' blocks are run by test_cli.py and test_cli_books.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.readme import marked_block, run_block

PAGE = "docs/questions.md"
REQUEST_ID = "<!-- tested by tests/e2e/test_docs_questions.py: where is this request id -->"
DIRECTORY = "<!-- tested by tests/e2e/test_docs_questions.py: tournaments, users and bets -->"


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_where_is_this_request_id_block_works_as_written(tmp_path: Path) -> None:
    block = marked_block(REQUEST_ID, path=PAGE)
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


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_operator_questions_block_runs_as_written_and_answers_them(tmp_path: Path) -> None:
    block = marked_block(DIRECTORY, path=PAGE)
    bin_dir = Path(sys.executable).parent  # the .venv/bin/ the page means
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    outputs = []
    for line in block.splitlines():
        if not line.startswith(".venv/bin/"):
            continue
        result = subprocess.run(
            ["bash", "-c", line.replace(".venv/bin/", f"{bin_dir}/")],
            cwd=tmp_path,  # the default database, ./ledger.db, lands here
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        outputs.append(result.stdout)
    _, _, bet, bets, tournament, user, users, tournaments = outputs
    assert "user u1 (Alice), pool 7 (Sunday Cup)" in bet
    assert len(bet.splitlines()) == 3  # the bet, then its two hold legs
    assert [item["uid"] for item in json.loads(bets)["bets"]] == [1001]
    assert tournament.splitlines()[0] == "tournament 7: Sunday Cup"
    assert user.splitlines()[0] == "user u1: Alice, client acme"
    assert "EUR  available 39.00  held 11.00" in user
    assert [row["name"] for row in csv.DictReader(io.StringIO(users))] == ["Alice"]
    assert tournaments.startswith("7  Sunday Cup  EUR")
