"""benchmarks/README.md: its results table is the results file's, every script it names exists,
and the set-based settle commands run as written (the quick one, on both paths).

The 100,000-participant lines are the same script with a larger ``--participants``; a test runs
the 1,000-participant line, always set-based (``--set-based-from 0``) and never (``1000000000``,
the value its comment gives), as a reader comparing the two would.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from support.readme import ROOT, marked_block

PAGE = "benchmarks/README.md"
HUGE = "<!-- tested by tests/e2e/test_benchmarks_readme.py: huge settles -->"
RESULTS = "<!-- results: the output of run.py --report benchmarks/results/run.json -->"


def test_readme_settle_cpu_command_settles_every_participant_on_both_paths() -> None:
    block = marked_block(HUGE, path=PAGE)
    (line,) = [line for line in block.splitlines() if "--set-based-from 0" in line]
    command = line.split("#")[0].split()
    assert command[:2] == [".venv/bin/python", "benchmarks/settle_cpu.py"]
    never = re.search(r"# (\d+): never", line)
    assert never is not None
    for threshold in ("0", never.group(1)):
        argv = [sys.executable, *command[1:-1], threshold]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        assert figures["participants"] == 1000
        assert figures["operation"] == "settle"
        assert figures["client_cpu_s"] > 0


def test_every_benchmark_the_settles_section_names_exists() -> None:
    block = marked_block(HUGE, path=PAGE)
    scripts = set(re.findall(r"benchmarks/\w+\.py", block))
    assert scripts == {
        "benchmarks/settle_cpu.py",
        "benchmarks/settle_http.py",
        "benchmarks/settle_split.py",
    }
    assert all((ROOT / Path(script)).is_file() for script in scripts)


def test_readme_settle_split_command_names_every_step_of_the_settle() -> None:
    block = marked_block(HUGE, path=PAGE)
    (line,) = [line for line in block.splitlines() if "benchmarks/settle_split.py" in line]
    command = line.split("#")[0].split()
    done = subprocess.run(
        [sys.executable, *command[1:]], cwd=ROOT, capture_output=True, text=True, check=True
    )
    figures = json.loads(done.stdout)
    assert figures["participants"] == 2000
    steps = {step["step"] for step in figures["steps"]}
    for step in ("closing.stage", "closing.write", "commit", "build the command (request, Seen)"):
        assert step in steps
    assert any(step.startswith("sql: UPDATE bets") for step in steps)


def test_the_results_table_is_what_run_py_reports_from_the_results_file() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--report", "benchmarks/results/run.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    page = (ROOT / PAGE).read_text()
    shown = page.split(RESULTS, 1)[1].lstrip("\n").split("\n\n", 1)[0]
    assert shown.strip() == done.stdout.strip()


def test_every_script_the_page_names_exists() -> None:
    scripts = set(re.findall(r"benchmarks/\w+\.py", (ROOT / PAGE).read_text()))
    assert len(scripts) >= 15
    assert [script for script in scripts if not (ROOT / script).is_file()] == []
