"""The README's "Answering an operator's questions" block, run as written by a reader."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- tested by tests/e2e/test_readme_directory.py -->"


def test_the_operator_questions_block_runs_as_written_and_answers_them(tmp_path: Path) -> None:
    text = README.read_text()
    after = text[text.index(MARKER) :]
    start = after.index("```sh\n") + len("```sh\n")
    block = after[start : after.index("\n```", start)]
    bin_dir = Path(sys.executable).parent  # the .venv/bin/ the README means
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
